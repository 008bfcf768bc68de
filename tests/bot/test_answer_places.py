"""Where the bot answers, per channel (`defaults.answers` in the access policy): only the asker
sees it, in the channel, or in a thread. Unlisted channels answer as they always did, and what
each answer shows is still what its readers may see. Through the real bolt app, signed
requests and the fake Slack."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from bot.slack.testing import FakeSlack
from incidents.store import IncidentStore
from tests.bot.bot_cluster import OTHER_TENANT_POD
from tests.bot.conftest import POLICY, Bot, running_bot
from tests.bot.test_bot_cli import _env

PLACED: dict[str, Any] = copy.deepcopy(POLICY)
PLACED["tenants"][0]["channels"] = ["CTEAMA", "CEPH", "CTHREAD"]
PLACED["defaults"] = {"answers": {"CTEAMA": "channel", "CEPH": "ephemeral", "CTHREAD": "thread"}}
FAQ = "ask Is a Pending GPU pod always an operator failure?"


@pytest.fixture
def placed(fake: FakeSlack, store: IncidentStore, settings: Any) -> Iterator[Bot]:
    with running_bot(settings, fake, store, policy=PLACED) as bot:
        yield bot


def _shown(call: Any) -> str:
    return str(call.args.get("text", "")) + json.dumps(call.args.get("blocks") or [])


def test_a_channel_that_wants_answers_in_it_gets_the_faq_as_a_message_of_its_own(
    placed: Bot,
) -> None:
    placed.slack.command(FAQ, user="UTENA", channel="CTEAMA")
    [post] = placed.fake.wait_posts(1)
    assert post.method == "chat.postMessage" and post.args["channel"] == "CTEAMA"
    assert "thread_ts" not in post.args and post.args["text"].startswith("No. A Pending GPU pod")
    # an unlisted channel: privately to the asker, as always
    placed.slack.command(FAQ, user="UTENA", channel="CPLAIN")
    assert placed.fake.wait_posts(2)[1].method == "response"


def test_pending_posted_in_the_channel_shows_only_what_the_channel_may_see(placed: Bot) -> None:
    placed.slack.command("pending", user="UOPS", channel="CTEAMA")
    placed.fake.wait(lambda: len(placed.fake.of("chat.postMessage")) >= 1)
    public = _shown(placed.fake.of("chat.postMessage")[0])
    assert public.count("team-a/train-x") and "team-b/" not in public
    assert "thread_ts" not in placed.fake.of("chat.postMessage")[0].args
    # the operator's wider view reaches the operator alone
    placed.fake.wait(lambda: len(placed.fake.of("response")) >= 1)
    assert "team-b/" in _shown(placed.fake.of("response")[0])


def test_a_triage_posted_in_a_tenant_channel_is_rendered_for_the_tenants(placed: Bot) -> None:
    placed.slack.command("why-pending train-x -n team-a", user="UOPS", channel="CTEAMA")
    [post] = placed.fake.wait_posts(1)
    assert post.method == "chat.postMessage" and "Blocked at scheduling" in _shown(post)
    assert OTHER_TENANT_POD not in _shown(post)  # operator detail stays out of a tenant channel


def test_an_ephemeral_channel_answers_even_a_blocked_triage_and_a_mention_to_the_asker_alone(
    placed: Bot,
) -> None:
    placed.slack.command("why-pending train-x -n team-a", user="UTENA", channel="CEPH")
    [reply] = placed.fake.wait_posts(1)
    assert reply.method == "response" and "Blocked at scheduling" in _shown(reply)
    assert reply.args.get("response_type") == "ephemeral"
    placed.slack.mention("pending", user="UTENA", channel="CEPH")
    placed.fake.wait(lambda: len(placed.fake.of("chat.postEphemeral")) >= 1)
    private = placed.fake.of("chat.postEphemeral")[0].args
    assert private["user"] == "UTENA" and "team-a/train-x" in _shown(
        placed.fake.of("chat.postEphemeral")[0]
    )
    assert not placed.fake.of("chat.postMessage")  # nothing anyone else can read


def test_a_thread_channel_answers_under_the_askers_message(placed: Bot) -> None:
    placed.slack.mention("pending", user="UTENA", channel="CTHREAD")
    placed.fake.wait(lambda: len(placed.fake.of("chat.postMessage")) >= 1)
    post = placed.fake.of("chat.postMessage")[0].args
    assert post["channel"] == "CTHREAD" and post.get("thread_ts", "").startswith("1600000000.")
    # a channel that wants messages of their own: the same mention is answered top-level
    placed.slack.mention("pending", user="UTENA", channel="CTEAMA")
    placed.fake.wait(lambda: len(placed.fake.of("chat.postMessage")) >= 2)
    assert "thread_ts" not in placed.fake.of("chat.postMessage")[1].args


def test_a_bad_answer_place_stops_the_bot_with_one_line_naming_the_setting(
    tmp_path: Path,
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump({"defaults": {"answers": {"C0123": "loudly"}}}))
    proc = subprocess.run(
        [sys.executable, "-m", "gpu_triage.cli", "bot"],
        env=_env(SLACK_SIGNING_SECRET="s" * 32, SLACK_BOT_TOKEN="xoxb-1-2-abc",
                 GPU_TRIAGE_ACCESS_POLICY=str(policy)),
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert proc.returncode == 2
    err = proc.stderr.strip()
    assert "\n" not in err and "GPU_TRIAGE_ACCESS_POLICY" in err
    assert "defaults.answers.C0123" in err and "'ephemeral', 'channel' or 'thread'" in err
