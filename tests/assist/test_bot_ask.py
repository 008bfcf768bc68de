"""`/gpu ask` and the optional summary, through the real bolt app and a fake Slack."""

from __future__ import annotations

import json
from typing import Any

from assist.ask import Assistant
from tests.assist.fakes import scripted
from tests.bot.conftest import Bot


def _text(args: dict[str, Any]) -> str:
    return str(args.get("text", "")) + json.dumps(args.get("blocks") or [])


def _assistant(bot: Bot, *replies: str) -> Assistant:
    model = scripted(*replies) if replies else None
    return Assistant(backend=bot.service, model=model)


def test_ask_faq_without_any_assistant(bot: Bot) -> None:
    bot.slack.command(
        "ask Is a Pending GPU pod always an operator failure?", user="UTENA", channel="CTEAMA"
    )
    text = bot.fake.wait_posts(1)[0].args["text"]
    assert text.startswith("No. A Pending GPU pod") and "`/gpu why-pending" in text
    bot.slack.command("ask what's the capital of France?", user="UTENA", channel="CTEAMA")
    assert "not enabled" in bot.fake.wait_posts(2)[1].args["text"]
    assert bot.service.count == 0


def test_ask_about_a_pod_runs_why_pending_with_policy(bot: Bot) -> None:
    bot.slack.command(
        "ask why is pod train-x pending in namespace team-a", user="UTENA", channel="CTEAMA"
    )
    first = bot.fake.wait_posts(1)[0]
    assert "Blocked at scheduling" in _text(first.args)
    bot.slack.command(
        "ask why is pod train-x pending in namespace team-a", user="UTENB", channel="DTENB1"
    )
    second = bot.fake.wait_posts(2)[1].args["text"]
    assert "No pod or workload named `train-x`" in second  # team-b may not see team-a


def test_no_model_means_the_triage_reply_is_unchanged(bot: Bot) -> None:
    bot.slack.command("why-pending train-x -n team-a", user="UTENA", channel="CTEAMA")
    before = bot.fake.wait_posts(1)[0].args["blocks"]
    bot.app.core.assistant = _assistant(bot)  # an assistant, but no model
    bot.slack.command("why-pending train-x -n team-a", user="UTENA", channel="CTEAMA")
    after = bot.fake.wait_posts(2)[1].args["blocks"]
    assert json.dumps(before) == json.dumps(after)
    assert "Summary" not in json.dumps(after)


def test_summary_appears_only_when_the_guard_passes(bot: Bot) -> None:
    good = "train-x is blocked at the scheduling layer: 0/1 nodes are available. Owner: workload-owner."
    bad = "train-x is blocked by quota."
    bot.app.core.assistant = _assistant(bot, good, bad)
    bot.slack.command("why-pending train-x -n team-a", user="UTENA", channel="CTEAMA")
    blocks = bot.fake.wait_posts(1)[0].args["blocks"]
    assert "Summary (written by a language model" in json.dumps(blocks[2])
    assert "scheduling layer" in json.dumps(blocks[2])
    bot.slack.command("why-pending train-x -n team-a", user="UTENA", channel="CTEAMA")
    blocks2 = bot.fake.wait_posts(2)[1].args["blocks"]
    assert "Summary" not in json.dumps(blocks2) and "quota." not in json.dumps(blocks2)


def test_a_model_naming_the_wrong_layer_is_overruled_in_slack_with_a_note(bot: Bot) -> None:
    bot.app.core.assistant = _assistant(bot, "train-x waits for quota: raise it.")
    bot.slack.command(
        "ask why is pod train-x pending in namespace team-a", user="UTENA", channel="CTEAMA"
    )
    text = bot.fake.wait_posts(1)[0].args["text"]
    assert "language model's answer was discarded" in text and "scheduling layer" in text
    assert "raise it" not in text


def test_ask_is_node_ok_answers_as_verify_node_does(bot: Bot) -> None:
    bot.slack.command("verify-node gpu-node-1", user="UOPS")
    command = bot.fake.wait_posts(1)[0].args["text"]
    bot.slack.command("ask is node gpu-node-1 ok?", user="UOPS")
    asked = bot.fake.wait_posts(2)[1].args["text"]
    assert asked == command and "fails at layer `driver`" in asked
    bot.slack.command("ask is node gpu-node-1 ok?", user="UTENA", channel="CTEAMA")
    assert "Only operators" in bot.fake.wait_posts(3)[2].args["text"]


def _response(bot: Bot, n: int) -> str:
    bot.fake.wait(lambda: len(bot.fake.of("response")) >= n)
    args = bot.fake.of("response")[n - 1].args
    return json.dumps(args.get("blocks") or []) + str(args.get("text", ""))


def test_ask_what_is_pending_answers_as_pending_does_with_policy(bot: Bot) -> None:
    bot.slack.command("pending -n team-a", user="UTENA", channel="DTENA")
    command = _response(bot, 1)
    bot.slack.command("ask what's pending in team-a?", user="UTENA", channel="DTENA")
    assert _response(bot, 2) == command and "team-a/train-x" in command
    bot.slack.command("ask what is stuck?", user="UTENA", channel="DTENA")
    mine = _response(bot, 3)
    assert "your namespaces" in mine and "team-a/" in mine and "team-b" not in mine
