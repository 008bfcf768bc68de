"""`gpu-triage bot` as a process: startup errors, and a full run against a snapshot + fake Slack."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import yaml

from bot.slack.testing import SECRET, FakeSlack, SlackSender
from tests.bot.bot_cluster import objects

ROOT = Path(__file__).parents[2]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "GPU_TRIAGE_"))}
    env.pop("PORT", None)
    env.pop("DATABASE_URL", None)
    env["PYTHONPATH"] = str(ROOT)
    env.update(extra)
    return env


def _bot(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "gpu_triage.cli", "bot", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_missing_setting_is_one_line_naming_it() -> None:
    proc = _bot(env=_env(SLACK_BOT_TOKEN="xoxb-1"))
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert err.strip() == "gpu-triage: error: SLACK_SIGNING_SECRET is not set"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(tmp_path: Path, fake: FakeSlack, *args: str) -> tuple[subprocess.Popen[str], int]:
    snap = tmp_path / "cluster.yaml"
    snap.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": objects()}))
    port = _free_port()
    env = _env(
        SLACK_SIGNING_SECRET=SECRET,
        SLACK_BOT_TOKEN="xoxb-test",
        SLACK_API_URL=fake.api_url,
        SLACK_RESPONSE_URL_PREFIXES=fake.url + "/",
        DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite'}",
    )
    proc = _bot("--snapshot", str(snap), "--host", "127.0.0.1", "--port", str(port), *args, env=env)
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as r:
                assert r.status == 200
                return proc, port
        except OSError:
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline
            time.sleep(0.2)


def _stop(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    return err


def test_a_bot_without_an_access_policy_says_so_to_users_and_operators(
    fake: FakeSlack, tmp_path: Path
) -> None:
    """A fresh install must not look broken: the asker hears there is no policy yet (and
    nothing about the cluster), the log and /readyz say what to set."""
    proc, port = _serve(tmp_path, fake)
    try:
        sender = SlackSender(url=f"http://127.0.0.1:{port}/slack/events", fake_url=fake.url)
        reply = sender.command("why-pending train-x -n team-a", user="UX", channel="DX")
        assert reply.status == 200
        text = reply.json()["text"]
        assert "no access policy" in text and "train-x" not in text and "team-a" not in text
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as r:
            assert r.status == 200 and b"no access policy configured" in r.read()
        assert fake.of("auth.test") and not fake.posts()
    finally:
        err = _stop(proc)
    assert "WARNING gpu_triage.cmd_bot: no access policy configured" in err


def test_bot_serves_a_snapshot_against_fake_slack(fake: FakeSlack, tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(yaml.safe_dump({"tenants": [
        {"name": "a", "namespaces": ["team-a"], "users": ["UX"]}]}))  # fmt: skip
    proc, port = _serve(tmp_path, fake, "--access-policy", str(policy))
    try:
        sender = SlackSender(url=f"http://127.0.0.1:{port}/slack/events", fake_url=fake.url)
        reply = sender.command("why-pending train-x -n team-a", user="UX", channel="DX")
        assert reply.status == 200
        post = fake.wait_posts(1, timeout=30)[0]
        assert "Blocked at scheduling" in str(post.args)
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as r:
            assert r.read() == b"ready\n"
    finally:
        err = _stop(proc)
    assert "access policy" not in err
