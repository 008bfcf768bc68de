"""The bot over SQLite that fails: locked by another process, deleted under the bot, read-only.

Whatever the database does, the ack does not wait for it, every command is answered exactly
once, an answer that could not be recorded says so (and the log too), and nothing leaks
database paths to tenants."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from bot.slack.testing import FakeSlack, SlackSender
from gpu_triage.settings import Settings
from incidents import IncidentStore
from incidents.database import create_store_engine
from incidents.timeouts import Timeouts
from tests.bot.conftest import Bot
from tests.bot.faults import (
    acked_at_once,
    answered_once,
    command,
    mention,
    recorded_keys,
    still_once,
)
from tests.bot.test_bot_cli import ROOT, _env, _serve, _stop
from tests.db_faults import read_only, sqlite_locked
from tests.incidents.incident_helpers import make_report

LEASE = 2.0


@pytest.fixture
def store(tmp_path: Path) -> Iterator[IncidentStore]:
    """The bot's store, with short lock and statement timeouts (seconds, not the defaults)."""
    url = f"sqlite:///{tmp_path / 'incidents.sqlite'}"
    s = IncidentStore(create_store_engine(url, timeouts=Timeouts(lock=0.5, statement=1, grace=0.5)))
    s.upgrade()
    yield s
    s.close()


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"job_lease": LEASE, "job_poll": 0.2})


def test_a_sqlite_file_locked_by_another_process_holds_up_no_ack_and_loses_no_command(
    bot: Bot, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    with sqlite_locked(tmp_path / "incidents.sqlite"):
        sent = [
            command(bot, "why-pending train-x -n team-a", user="UTENA", channel="DTENA"),
            command(bot, "incidents"),
            mention(bot, "why-pending eval-b -n team-b"),
        ]
        acked_at_once(sent)
        tenant, listed, operators = answered_once(bot, sent)  # while the lock is still held
    for answer in (tenant, listed, operators):  # locked, or queued behind the lock too long
        assert re.search(r"Not recorded: the incident database (is locked|did not answer)", answer)
    assert "sqlite" not in tenant  # the kind of fault only; the operators' channel gets the file
    assert "incidents.sqlite is unavailable: database is locked" in operators
    assert "answered here without a record" in caplog.text
    # Once the lock is gone, the commands' records are retried, and nobody answers again.
    bot.fake.wait(lambda: {s.key for s in sent} <= recorded_keys(bot), timeout=15)
    still_once(bot, sent, wait=LEASE + 1)
    later = command(bot, "why-pending train-x -n team-a", user="UTENA", channel="DTENA")
    (answer,) = answered_once(bot, [later])
    assert "Not recorded" not in answer and bot.store.list()[0].name == "train-x"


def test_a_sqlite_file_deleted_under_the_bot_is_noticed_and_said(
    bot: Bot, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    answered_once(bot, [command(bot, "why-pending train-x -n team-a")])
    for p in tmp_path.glob("incidents.sqlite*"):
        p.unlink()
    sent = [
        command(bot, "why-pending train-x -n team-a", user="UTENA", channel="DTENA"),
        command(bot, "incidents", user="UTENA", channel="DTENA"),
    ]
    acked_at_once(sent)
    why, listed = answered_once(bot, sent)
    assert "Not recorded: the incident database has lost its file" in why
    assert "The incident database has lost its file" in listed and "sqlite" not in listed
    assert "not recorded" in caplog.text and "is gone" in caplog.text
    assert not (tmp_path / "incidents.sqlite").exists()  # not silently recreated, empty
    with urllib.request.urlopen(bot.base_url + "/readyz", timeout=5) as r:
        assert r.status == 200
        assert b"degraded: incident database file" in r.read()


def _seeded(tmp_path: Path) -> Path:
    """A database with one incident of train-x in it."""
    path = tmp_path / "db.sqlite"
    with IncidentStore.from_url(f"sqlite:///{path}") as s:
        s.upgrade()
        s.record(make_report(namespace="team-a", name="train-x", cluster="demo"),
                 requested_by="U1", duration_ms=1.0)  # fmt: skip
    return path


def test_a_read_only_database_starts_the_bot_degraded_and_it_answers(
    fake: FakeSlack, tmp_path: Path
) -> None:
    path = _seeded(tmp_path)
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump({"operators": {"users": ["UOPS"]}}))
    with read_only(path):
        proc, port = _serve(tmp_path, fake, "--access-policy", str(policy))
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as r:
                ready = r.read().decode()
            assert r.status == 200 and "degraded: incident database" in ready
            assert "read-only" in ready
            slack = SlackSender(url=f"http://127.0.0.1:{port}/slack/events", fake_url=fake.url)
            reply = slack.command("why-pending train-x -n team-a", user="UOPS", channel="DOPS")
            assert reply.status == 200 and reply.seconds < 3
            (post,) = fake.wait_posts(1, timeout=30)
            assert "Not recorded: the incident database is read-only" in str(post.args)
        finally:
            err = _stop(proc)
    assert "running degraded, nothing is recorded" in err and "SLACK_BOT_TOKEN" not in err


@pytest.mark.parametrize("what", ["file", "directory"])
def test_the_cli_reads_a_read_only_database(tmp_path: Path, what: str) -> None:
    path = _seeded(tmp_path)
    env = {**_env(), "DATABASE_URL": f"sqlite:///{path}", "GPU_TRIAGE_AUTO_MIGRATE": "1"}
    with read_only(path if what == "file" else tmp_path):
        for args in (["incidents"], ["incident", "1"]):
            done = subprocess.run(
                [sys.executable, "-m", "gpu_triage.cli", *args],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert done.returncode == 0, done.stderr
            assert "train-x" in done.stdout
    assert os.access(path, os.R_OK)
