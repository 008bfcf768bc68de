"""`/gpu pending` through the real bolt app over signed HTTP: the groups a user may see, one
private message with a section and a button per group; the button opens the group's thread."""

from __future__ import annotations

import json

from bot.core.refs import group_value
from tests.bot.conftest import Bot


def _reply(bot: Bot, n: int = 1) -> tuple[str, list[dict]]:  # type: ignore[type-arg]
    bot.fake.wait(lambda: len(bot.fake.of("response")) >= n)
    args = bot.fake.of("response")[n - 1].args
    return str(args.get("text", "")), list(args.get("blocks") or [])


def test_an_operator_sees_every_group_with_a_button_each(bot: Bot) -> None:
    reply = bot.slack.command("pending", user="UOPS", channel="DOPS")
    assert reply.status == 200
    text, blocks = _reply(bot)
    shown = json.dumps(blocks)
    assert "stuck workload(s)" in text and "all namespaces" in shown
    buttons = [b["accessory"] for b in blocks if b.get("accessory")]
    assert buttons and all(b["action_id"] == "gpu_group_thread" for b in buttons)
    assert "team-a/train-x" in shown


def test_a_tenant_sees_only_their_members(bot: Bot) -> None:
    bot.slack.command("pending", user="UTENA", channel="DTENA")
    _, blocks = _reply(bot)
    shown = json.dumps(blocks)
    assert "your namespaces" in shown and "team-a/" in shown and "team-b" not in shown


def test_a_namespace_the_tenant_may_not_see_reads_as_empty(bot: Bot) -> None:
    bot.slack.command("pending -n team-b", user="UTENA", channel="DTENA")
    _, theirs = _reply(bot, 1)
    bot.slack.command("pending -n no-such-ns", user="UTENA", channel="DTENA")
    _, missing = _reply(bot, 2)
    assert json.dumps(theirs).replace("team-b", "N") == json.dumps(missing).replace(
        "no-such-ns", "N"
    )
    assert "0 stuck workload(s)" in json.dumps(theirs)


def test_bad_pending_options_get_a_one_line_usage_error(bot: Bot) -> None:
    reply = bot.slack.command("pending --bogus", user="UOPS", channel="DOPS")
    assert reply.status == 200 and "pending takes -n NAMESPACE" in reply.body


def test_the_group_button_opens_a_thread_once_and_links_it_after(bot: Bot) -> None:
    sweep = bot.service.sweep(cluster=None)
    bot.store.groups.sync(sweep.cluster, sweep.groups)  # what the watch loop does
    value = group_value(sweep.groups[0])
    bot.slack.click(action_id="gpu_group_thread", value=value, user="UOPS", channel="COPS")
    bot.fake.wait(lambda: len(bot.fake.of("response")) >= 1)
    assert len(bot.fake.of("chat.postMessage")) == 1  # the thread root, in the operator channel
    assert (
        "Incident thread of that cause: https://fake.slack/"
        in bot.fake.of("response")[0].args["text"]
    )
    bot.slack.click(action_id="gpu_group_thread", value=value, user="UOPS", channel="COPS")
    bot.fake.wait(lambda: len(bot.fake.of("response")) >= 2)
    assert len(bot.fake.of("chat.postMessage")) == 1  # the same thread, linked again
    # A tenant with no member in the group learns nothing; a forged value neither.
    bot.slack.click(action_id="gpu_group_thread", value="{not json", user="UTENB", channel="DTENB")
    bot.fake.wait(lambda: len(bot.fake.of("response")) >= 3)
    assert "No open incident for that cause" in bot.fake.of("response")[2].args["text"]


def _posted(bot: Bot, method: str, n: int) -> list[str]:
    bot.fake.wait(lambda: len(bot.fake.of(method)) >= n)
    return [json.dumps(c.args.get("blocks")) for c in bot.fake.of(method)]


def test_a_mention_answers_in_the_thread_what_the_channel_may_see(bot: Bot) -> None:
    """In an operator channel the whole picture goes to the thread; in a tenant's channel only
    that tenant's namespaces do, and the operator gets the rest privately."""
    bot.slack.mention("pending", user="UOPS", channel="COPS", thread_ts="1700000000.000100")
    [public] = _posted(bot, "chat.postMessage", 1)
    assert "team-a/train-x" in public and "team-b/" in public
    assert not bot.fake.of("chat.postEphemeral")

    bot.slack.mention("pending", user="UOPS", channel="CTEAMA", thread_ts="1700000000.000200")
    public = _posted(bot, "chat.postMessage", 2)[1]
    assert "team-a/train-x" in public and "team-b/" not in public
    [private] = _posted(bot, "chat.postEphemeral", 1)
    assert "team-b/" in private
    call = bot.fake.of("chat.postEphemeral")[0]
    assert call.args["user"] == "UOPS" and call.args["thread_ts"] == "1700000000.000200"


def test_a_tenant_mentioning_the_bot_elsewhere_shows_the_channel_nothing(bot: Bot) -> None:
    bot.slack.mention("pending", user="UTENA", channel="CRANDOM", thread_ts="1700000000.000300")
    [public] = _posted(bot, "chat.postMessage", 1)
    assert "team-a/" not in public and "0 stuck workload(s)" in public
    [private] = _posted(bot, "chat.postEphemeral", 1)
    assert "team-a/train-x" in private and "team-b/" not in private
