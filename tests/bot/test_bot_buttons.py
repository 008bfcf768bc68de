"""Re-run, Resolve and Escalate: signed interactive payloads, follow-ups in the thread."""

from __future__ import annotations

from typing import Any

from incidents.values import IncidentStatus
from tests.bot.conftest import Bot


def _first_report(bot: Bot) -> tuple[dict[str, Any], dict[str, str]]:
    """Triage in the on-call channel; return the posted message (as Slack stores it) and buttons."""
    bot.slack.command("why-pending train-x -n team-a", channel="COPS")
    post = bot.fake.wait_posts(1)[0]
    message = {"ts": bot.thread_of("train-x"), "blocks": post.args["blocks"]}
    actions = next(b for b in post.args["blocks"] if b["type"] == "actions")["elements"]
    return message, {a["action_id"]: a["value"] for a in actions}


def test_rerun_posts_in_the_thread(bot: Bot) -> None:
    message, values = _first_report(bot)
    reply = bot.slack.click(action_id="gpu_rerun", value=values["gpu_rerun"], message=message)
    assert reply.status == 200
    rerun = bot.fake.wait_posts(2)[1]
    assert rerun.args["thread_ts"] == message["ts"]
    assert "Re-run by <@UOPS>" in rerun.args["text"]
    assert bot.service.count == 2


def test_resolve_updates_the_message_and_the_store(bot: Bot) -> None:
    message, values = _first_report(bot)
    bot.slack.click(action_id="gpu_resolve", value=values["gpu_resolve"], message=message)
    bot.fake.wait(lambda: bool(bot.fake.of("chat.update")))
    update = bot.fake.of("chat.update")[0]
    assert update.args["ts"] == message["ts"]
    assert not [b for b in update.args["blocks"] if b["type"] == "actions"]
    assert "resolved by <@UOPS>" in update.args["text"]
    note = bot.fake.wait_posts(2)[1]
    assert note.args["thread_ts"] == message["ts"]
    incidents = bot.store.list()
    assert incidents[0].status is IncidentStatus.RESOLVED
    assert incidents[0].resolved_by == "UOPS"
    # pressing it again says so instead of failing
    bot.slack.click(action_id="gpu_resolve", value=values["gpu_resolve"], message=message)
    again = bot.fake.wait_posts(3)[2]
    assert "already resolved" in again.args["text"]


def test_escalate_posts_to_the_owner_with_a_link_back(bot: Bot) -> None:
    message, values = _first_report(bot)
    bot.slack.click(action_id="gpu_escalate", value=values["gpu_escalate"], message=message)
    posts = bot.fake.wait_posts(3)
    to_owner = next(p for p in posts if p.args["channel"] == "#gpu-help")
    link = bot.fake.of("chat.getPermalink")[0]
    assert link.args["message_ts"] == message["ts"]
    assert "https://fake.slack/archives/COPS/p" in to_owner.args["text"]
    assert "<!channel>" not in to_owner.args["text"] + str(to_owner.args["blocks"])
    in_thread = next(p for p in posts if p.args.get("thread_ts") == message["ts"])
    assert "Escalated to #gpu-help by <@UOPS>" in in_thread.args["text"]


def test_button_from_another_tenant_reveals_nothing(bot: Bot) -> None:
    message, values = _first_report(bot)
    bot.slack.click(
        action_id="gpu_resolve",
        value=values["gpu_resolve"],
        user="UTENB",
        channel="CRANDOM",
        message=message,
    )
    reply = bot.fake.wait(lambda: bool(bot.fake.of("response")))
    reply = bot.fake.of("response")[0]
    assert "No pod or workload named `train-x`" in reply.args["text"]
    assert bot.store.list()[0].status is IncidentStatus.OPEN


def test_rerun_on_a_private_reply_replaces_it(bot: Bot) -> None:
    bot.slack.command("why-pending train-x -n team-a", user="UTENA", channel="DTENA")
    bot.fake.wait(lambda: bool(bot.fake.of("response")))
    first = bot.fake.of("response")[0]
    actions = next(b for b in first.args["blocks"] if b["type"] == "actions")["elements"]
    bot.slack.click(
        action_id="gpu_rerun",
        value=actions[0]["value"],
        user="UTENA",
        channel="DTENA",
        ephemeral=True,
    )
    bot.fake.wait(lambda: len(bot.fake.of("response")) >= 2)
    second = bot.fake.of("response")[1]
    assert second.args["replace_original"] is True
    assert "Blocked at scheduling" in second.args["blocks"][0]["text"]["text"]


def test_acknowledge_and_snooze_are_recorded_with_the_presser_and_said_in_the_thread(
    bot: Bot,
) -> None:
    message, values = _first_report(bot)
    assert {"gpu_ack", "gpu_snooze"} <= set(values)  # on a report with an incident
    bot.slack.click(action_id="gpu_ack", value=values["gpu_ack"], message=message)
    note = bot.fake.wait_posts(2)[1]
    assert note.args["thread_ts"] == message["ts"]
    assert "acknowledged by <@UOPS>" in note.args["text"]
    incident = bot.store.list()[0]
    assert incident.status is IncidentStatus.ACKNOWLEDGED and incident.acknowledged_by == "UOPS"
    bot.slack.click(action_id="gpu_snooze", value=values["gpu_snooze"], message=message)
    snoozed = bot.fake.wait_posts(3)[2]
    assert snoozed.args["thread_ts"] == message["ts"]
    assert "snoozed by <@UOPS> until " in snoozed.args["text"]
    incident = bot.store.list()[0]
    assert incident.snoozed_by == "UOPS" and incident.snoozed_until is not None
    assert (incident.snoozed_until - incident.acknowledged_at).total_seconds() >= 4 * 3600 - 5  # type: ignore[operator]
