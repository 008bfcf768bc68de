"""What a platform team's pipelines see of a running bot: its log lines, its metrics, and how
its Slack client rides out Slack's rate limits and errors.

- `LOG_FORMAT=json`: every line on stderr is one JSON object with a time, a level, a logger
  and a message; no library speaks at start; a warning is said once.
- `GPU_TRIAGE_METRICS_PORT`: /metrics is served there and not on the Slack port; every name
  starts with `gpu_triage_`, and no `_created` series is exported.
- The Web API client retries 429 after its Retry-After, and 5xx, with slack_sdk's handlers.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from bot.slack.testing import SECRET, FakeSlack
from gpu_triage.cli import main
from gpu_triage.cmd_bot import slack_client
from gpu_triage.logs import OncePerFact
from gpu_triage.settings import load_settings
from tests.bot.bot_cluster import objects

ROOT = Path(__file__).parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_the_bot_logs_json_and_serves_prefixed_metrics_on_a_port_of_its_own(
    fake: FakeSlack, tmp_path: Path
) -> None:
    snap = tmp_path / "cluster.yaml"
    snap.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": objects()}))
    port, metrics_port = _free_port(), _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "GPU_TRIAGE_"))}
    env.pop("DATABASE_URL", None)
    env.update(PYTHONPATH=str(ROOT), SLACK_SIGNING_SECRET=SECRET, SLACK_BOT_TOKEN="xoxb-test",
               SLACK_API_URL=fake.api_url, DATABASE_URL=f"sqlite:///{tmp_path / 'db.sqlite'}",
               LOG_FORMAT="json", GPU_TRIAGE_METRICS_PORT=str(metrics_port))  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpu_triage.cli", "bot", "--snapshot", str(snap), "--host",
         "127.0.0.1", "--port", str(port)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while _get_or_none(f"http://127.0.0.1:{port}/healthz") != 200:
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline
            time.sleep(0.2)
        status, body = _get(f"http://127.0.0.1:{metrics_port}/metrics")
        assert status == 200
        assert _get(f"http://127.0.0.1:{port}/metrics")[0] == 404  # not beside /slack/events
    finally:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    families = list(text_string_to_metric_families(body.decode()))
    names = {s.name for f in families for s in f.samples}
    assert "gpu_triage_triages_total" in names and "gpu_triage_incident_store_up" in names
    assert all(n.startswith("gpu_triage_") for n in names), sorted(names)
    assert not [n for n in names if n.endswith("_created")]
    lines = [json.loads(line) for line in err.splitlines()]  # every line is JSON
    assert all({"time", "level", "logger", "message"} <= set(r) for r in lines)
    assert all(r["time"].endswith("Z") and r["level"] in ("info", "warning") for r in lines)
    assert not [r for r in lines if r["logger"].split(".")[0] in ("alembic", "waitress")]
    serving = [r for r in lines if "serving" in r["message"]]
    assert len(serving) == 1 and f"metrics on :{metrics_port}/metrics" in serving[0]["message"]
    assert sum("no access policy" in r["message"] for r in lines) == 1
    assert out == ""


def _get_or_none(url: str) -> int | None:
    try:
        return _get(url)[0]
    except OSError:
        return None


def test_one_fact_is_one_line_and_the_next_one_counts_the_rest() -> None:
    now = [0.0]
    once = OncePerFact(window=600, clock=lambda: now[0])
    said = []
    for i in range(100):
        now[0] = i
        record = logging.LogRecord("gpu_triage.metrics", logging.WARNING, __file__, 1,
                                   "metrics: %s", ("database down",), None)  # fmt: skip
        if once.filter(record):
            said.append(record.getMessage())
    assert said == ["metrics: database down"]
    now[0] = 700.0
    record = logging.LogRecord("gpu_triage.metrics", logging.WARNING, __file__, 1,
                               "metrics: %s", ("database down",), None)  # fmt: skip
    assert once.filter(record)
    assert record.getMessage() == "metrics: database down (and 99 more like it in the last 10m)"
    debug = logging.LogRecord("x", logging.DEBUG, __file__, 1, "same", None, None)
    assert once.filter(debug) and once.filter(debug)  # debugging output is never dropped
    held = logging.LogRecord(
        "x", logging.INFO, __file__, 1, "alert held back: quiet hours", None, None
    )
    assert once.filter(held) and not once.filter(held)  # one fact, one line, at info too


def test_a_bad_log_setting_is_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LOG_FORMAT", "xml")
    assert main(["demo"]) == 2
    assert (
        capsys.readouterr().err == "gpu-triage: error: LOG_FORMAT must be text or json, not 'xml'\n"
    )


class _Slack(BaseHTTPRequestHandler):
    """chat.postMessage answers 429 (Retry-After: 1), then 503, then ok."""

    answers: ClassVar[list[tuple[int, dict[str, str]]]] = []
    seen: ClassVar[list[float]] = []

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).seen.append(time.monotonic())
        status, headers = type(self).answers.pop(0) if type(self).answers else (200, {})
        body = json.dumps({"ok": status == 200, "channel": "C1", "ts": "1.1"}).encode()
        self.send_response(status)
        for k, v in {"Content-Type": "application/json", **headers}.items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def test_the_slack_client_retries_rate_limits_after_retry_after_and_server_errors() -> None:
    _Slack.answers = [(429, {"Retry-After": "1"}), (503, {})]
    _Slack.seen = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Slack)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        settings = load_settings(
            slack_signing_secret=SECRET, slack_bot_token="xoxb-test",
            slack_api_url=f"http://127.0.0.1:{server.server_address[1]}/api/",
        )  # fmt: skip
        reply = slack_client(settings).chat_postMessage(channel="C1", text="hello")
    finally:
        server.shutdown()
        server.server_close()
    assert reply["ok"] and len(_Slack.seen) == 3
    assert _Slack.seen[1] - _Slack.seen[0] >= 1.0  # Retry-After honoured
