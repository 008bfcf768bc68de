"""Buttons act only on what the presser may touch, whatever the payload claims: the incident is
loaded and checked against the presser's grants, the channel grants rights only where it is
the incident's recorded channel, and the bot edits only its own message for that incident."""

from __future__ import annotations

import json
from typing import Any

import pytest

from incidents.values import IncidentStatus
from tests.bot.conftest import Bot
from tests.bot.faults import answered_once, command

MARK = "FORGED-BLOCKS"


def _incident_in(bot: Bot, *, channel: str, user: str, name: str, ns: str) -> tuple[int, str]:
    """Triage `ns/name` in `channel`; the incident's id and its thread (the bot's post)."""
    bot.slack.command(f"why-pending {name} -n {ns}", user=user, channel=channel)
    ts = bot.thread_of(name, namespace=ns)
    inc = bot.store.open_incident_for(cluster="demo", namespace=ns, name=name)
    assert inc is not None and inc.channel == channel
    return inc.id, ts


def _press(
    bot: Bot, *, action: str, value: dict[str, Any], user: str, channel: str, ts: str
) -> None:
    payload = bot.slack.click_payload(
        action_id=action,
        value=json.dumps(value),
        user=user,
        channel=channel,
        message={
            "ts": ts,
            "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": MARK}}],
        },
    )
    assert bot.slack.interaction(payload).status == 200


def _everything_sent(bot: Bot) -> str:
    return json.dumps([c.args for c in bot.fake.calls])


def test_another_tenants_incident_cannot_be_resolved_by_rewriting_the_value(bot: Bot) -> None:
    team_a, ts = _incident_in(bot, channel="COPS", user="UOPS", name="train-x", ns="team-a")
    # team-b's tenant claims their own namespace and workload, with team-a's incident id.
    _press(bot, action="gpu_resolve", user="UTENB", channel="DTENB", ts=ts,
           value={"c": "demo", "n": "team-b", "p": "eval-b", "i": str(team_a)})  # fmt: skip
    bot.fake.wait(lambda: bool(bot.fake.of("response")))
    assert "No pod or workload named `train-x` in namespace `team-a`" in str(
        bot.fake.of("response")[-1].args
    )
    assert bot.store.get(team_a).status is IncidentStatus.OPEN  # type: ignore[union-attr]
    assert bot.fake.of("chat.update") == []


def test_naming_the_operator_channel_grants_no_operator_rights(bot: Bot) -> None:
    team_a, ts = _incident_in(bot, channel="CTEAMA", user="UTENA", name="train-x", ns="team-a")
    _press(bot, action="gpu_resolve", user="UTENB", channel="COPS", ts=ts,
           value={"c": "demo", "n": "team-a", "p": "train-x", "i": str(team_a)})  # fmt: skip
    bot.fake.wait(lambda: bool(bot.fake.of("response")))
    assert bot.store.get(team_a).status is IncidentStatus.OPEN  # type: ignore[union-attr]
    assert bot.fake.of("chat.update") == []


def test_a_press_cannot_make_the_bot_edit_a_message_in_another_channel(bot: Bot) -> None:
    _team_a, their_ts = _incident_in(
        bot, channel="CTEAMA", user="UTENA", name="train-x", ns="team-a"
    )
    answered_once(
        bot, [command(bot, "why-pending eval-b -n team-b", user="UTENB", channel="DTENB")]
    )
    own = bot.store.open_incident_for(cluster="demo", namespace="team-b", name="eval-b")
    assert own is not None
    # UTENB resolves their own incident, but names team-a's channel and message.
    _press(bot, action="gpu_resolve", user="UTENB", channel="CTEAMA", ts=their_ts,
           value={"c": "demo", "n": "team-b", "p": "eval-b", "i": str(own.id)})  # fmt: skip
    bot.fake.wait(lambda: bot.store.get(own.id).status is IncidentStatus.RESOLVED)  # type: ignore[union-attr]
    bot.fake.wait(lambda: len(bot.fake.of("response")) >= 2)
    assert bot.fake.of("chat.update") == []  # answered privately instead
    assert MARK not in _everything_sent(bot)
    assert not [c for c in bot.fake.of("chat.postMessage") if c.args.get("thread_ts") == their_ts]


def test_resolve_edits_the_bots_own_message_with_blocks_rebuilt_from_the_store(bot: Bot) -> None:
    inc_id, ts = _incident_in(bot, channel="COPS", user="UOPS", name="train-x", ns="team-a")
    _press(bot, action="gpu_resolve", user="UOPS", channel="COPS", ts=ts,
           value={"c": "demo", "n": "team-a", "p": "train-x", "i": str(inc_id)})  # fmt: skip
    bot.fake.wait(lambda: bool(bot.fake.of("chat.update")))
    (update,) = bot.fake.of("chat.update")
    assert update.args["channel"] == "COPS" and update.args["ts"] == ts
    shown = json.dumps(update.args["blocks"])
    assert MARK not in shown and "Blocked at scheduling" in shown and '"actions"' not in shown


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ({"n": "team-a", "p": "train-x", "i": "abc"}, "No incident `abc`"),
        ({"n": "team-a", "p": "train-x", "i": "100000000000000000000000"}, "No incident"),
        ({"n": "team-a", "p": "train-x", "i": "²"}, "No incident"),
        ({"n": "Team_A", "p": "train-x"}, "button's data is malformed"),
        ({"n": ["team-a"], "p": "train-x"}, "button's data is malformed"),
    ],
)
def test_a_button_value_that_names_nothing_is_answered_in_one_line(
    bot: Bot, value: dict[str, Any], said: str
) -> None:
    _press(bot, action="gpu_resolve", user="UOPS", channel="COPS", ts="1.2", value=value)
    bot.fake.wait(lambda: bool(bot.fake.of("response")))
    text = str(bot.fake.of("response")[0].args.get("text"))
    assert said in text.replace("\u2060", "") and "Something went wrong" not in text
    assert "\n" not in text


@pytest.mark.parametrize("action", ["gpu_ack", "gpu_snooze"])
def test_another_tenants_incident_cannot_be_acknowledged_or_snoozed(bot: Bot, action: str) -> None:
    team_a, ts = _incident_in(bot, channel="COPS", user="UOPS", name="train-x", ns="team-a")
    _press(bot, action=action, user="UTENB", channel="DTENB", ts=ts,
           value={"c": "demo", "n": "team-b", "p": "eval-b", "i": str(team_a)})  # fmt: skip
    bot.fake.wait(lambda: bool(bot.fake.of("response")))
    assert "No pod or workload named `train-x` in namespace `team-a`" in str(
        bot.fake.of("response")[-1].args
    )
    after = bot.store.get(team_a)
    assert after is not None and after.status is IncidentStatus.OPEN
    assert after.acknowledged_by is None and after.snoozed_until is None
