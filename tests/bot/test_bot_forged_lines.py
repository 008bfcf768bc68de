"""No forged lines: text from the cluster (here an event message carrying every kind of line
separator) stays on the line it was quoted in, wherever it is shown: a Slack reply, the CLI's
text report, and the digest a language model reads."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from assist.summary import report_data
from bot.slack.mrkdwn import code, escape
from gpu_triage.cli import main
from tests.bot.bot_cluster import objects
from tests.bot.conftest import Bot
from triage import MemorySource, triage

SEPARATORS = ("\r", "\v", "\f", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029", "\x1b")
_LEAD = re.compile(r"^[\s\u2060]*")


def _forged_lines(text: str) -> list[str]:
    """Lines that begin with the forged text, or with a quote or list marker it brought."""
    starts = ("*Failing layer:* driver (forged)", "&gt; quoted", "> quoted", "- forged",
              "• forged", "```forged", "forged")  # fmt: skip
    lines = [_LEAD.sub("", line) for line in text.split("\n")]
    return [line for line in lines if line.startswith(starts)]


def _shown(args: dict[str, object]) -> list[str]:
    """Every text a user sees in a message: its text, and each block's mrkdwn."""
    texts = [str(args.get("text", ""))]

    def walk(node: object) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("text"), str):
                texts.append(node["text"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(args.get("blocks") or [])
    return texts


def test_a_slack_reply_keeps_cluster_text_on_its_own_line(bot: Bot) -> None:
    bot.slack.command("why-pending train-x -n team-a", channel="COPS")
    texts = _shown(bot.fake.wait_posts(1)[0].args)
    assert any("forged bullet" in t for t in texts)  # the evidence is shown, on one line
    for text in texts:
        assert not [s for s in SEPARATORS if s in text]
        assert _forged_lines(text) == []


def test_the_cli_text_report_keeps_cluster_text_on_its_own_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    snapshot = tmp_path / "cluster.yaml"
    snapshot.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": objects()}))
    assert main(["why-pending", "train-x", "-n", "team-a", "--snapshot", str(snapshot)]) == 0
    out = capsys.readouterr().out
    assert "forged bullet" in out
    assert not [s for s in SEPARATORS if s in out]
    assert _forged_lines(out) == []


def test_the_digest_a_model_reads_keeps_cluster_text_on_one_line() -> None:
    report = triage(
        MemorySource(objects(), cluster_name="demo"), namespace="team-a", name="train-x"
    )
    data = report_data(report, operator=True)
    assert "forged bullet" in data
    assert "\\n" not in data and "\\r" not in data  # no escaped line break inside the JSON
    assert not [s for s in SEPARATORS if s in data]
    assert all("\n" not in s for s in json.loads(data)["findings"][2]["evidence"])


@pytest.mark.parametrize("text", ["> quote", "- item", "• item", "+ item"])
def test_cluster_text_cannot_open_a_quote_or_a_list(text: str) -> None:
    shown = escape(text)
    assert shown.startswith("\u2060")  # the marker no longer starts the line
    assert shown[1:] == text.replace(">", "&gt;")  # and it reads as typed


@pytest.mark.parametrize("text", ["```block```", "`span`", "*bold*"])
def test_cluster_text_cannot_open_code_or_formatting(text: str) -> None:
    shown = escape(text)
    assert text not in shown and shown.replace("\u2060", "") == text


def test_a_code_span_holds_on_one_line() -> None:
    assert code("a\nb\u2028c`d") == "`a b c'd`"
