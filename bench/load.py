"""The Slack bot under load, as Slack sends it: many signed `/gpu why-pending` commands at once.

    python -m bench.load [--commands 200] [--in-flight 1 20 50] [--latency 0.3]

Starts a synthetic cluster (`bench.serve`, whose API answers every get and list after
`--latency` seconds: a slow API server), a fake Slack on loopback (`bot.slack.testing`), and the real
`gpu-triage bot` process against both (live mode, watch-backed cache, SQLite incident store).
Then, per level of concurrency, sends `--commands` slash commands cycling over `--workloads`
distinct stuck pods, `--in-flight` at a time, and reports what a user would notice: how long
the ack took (Slack gives up after 3 s), connections refused or reset, commands never answered,
"busy" answers, and incidents opened twice for one workload. One at a time is the baseline.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import urlsplit

import yaml
from slack_sdk.signature import SignatureVerifier

from bench.run import pct
from bench.serve import launch
from bot.slack.testing import SECRET, FakeSlack, FakeSlackServer, SlackSender
from kube.testing import write_kubeconfig

OPERATOR = "ULOAD"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait_ready(url: str, proc: subprocess.Popen[str], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the bot exited: {proc.communicate()[1][-2000:]}")
        try:
            with urllib.request.urlopen(url + "/readyz", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit("the bot did not become ready")


class Ack:
    __slots__ = ("error", "seconds", "status")

    def __init__(self, status: int, seconds: float, error: str = "") -> None:
        self.status, self.seconds, self.error = status, seconds, error


def _send(sender: SlackSender, text: str, channel: str) -> Ack:
    """One signed command over its own connection, as Slack sends it; the ack's time."""
    body = sender.command_body(text, user=OPERATOR, channel=channel)
    ts = str(int(time.time()))
    sig = str(SignatureVerifier(SECRET).generate_signature(timestamp=ts, body=body))
    url = urlsplit(sender.url)
    start = time.perf_counter()
    conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=10)
    try:
        conn.request("POST", url.path, body=body.encode(), headers={
            "Content-Type": "application/x-www-form-urlencoded",
            "X-Slack-Request-Timestamp": ts, "X-Slack-Signature": sig,
        })  # fmt: skip
        resp = conn.getresponse()
        resp.read()
        return Ack(resp.status, time.perf_counter() - start)
    except OSError as e:  # refused, reset, timed out
        return Ack(0, time.perf_counter() - start, type(e).__name__)
    finally:
        conn.close()


def _round(
    fake: FakeSlack, sender: SlackSender, work: list[tuple[str, str]], *, commands: int, flight: int
) -> dict[str, float]:
    before = len(fake.of("response"))
    texts = [f"why-pending {name} -n {ns}" for ns, name in work]
    start = time.perf_counter()
    with ThreadPoolExecutor(flight) as pool:
        acks = list(pool.map(
            lambda i: _send(sender, texts[i % len(texts)], f"DLOAD{i % 97}"), range(commands)
        ))  # fmt: skip
    sent = time.perf_counter() - start
    deadline = time.monotonic() + 120
    ok = [a for a in acks if a.status == 200]
    # each command gets its ack (the "Triaging …" text) and then one answer at its response_url
    while len(fake.of("response")) - before < len(ok) and time.monotonic() < deadline:
        time.sleep(0.05)
    answers = fake.of("response")[before:]
    busy = sum("Too many triages" in json.dumps(a.args) for a in answers)
    seconds = sorted(a.seconds for a in acks)
    return {
        "in flight": flight,
        "ack p50 ms": pct(seconds, 50) * 1000,
        "ack p95 ms": pct(seconds, 95) * 1000,
        "ack p99 ms": pct(seconds, 99) * 1000,
        "refused/reset": sum(1 for a in acks if a.error),
        "not 200": sum(1 for a in acks if a.status not in (0, 200)),
        "answered": len(answers),
        "unanswered": commands - len(answers),
        "busy": busy,
        "commands/s": commands / sent,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commands", type=int, default=200)
    parser.add_argument("--in-flight", type=int, nargs="+", default=[1, 20, 50])
    parser.add_argument("--workloads", type=int, default=7, help="distinct pods asked about")
    parser.add_argument("--latency", type=float, default=0.3, help="seconds per API read")
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--pods", type=int, default=6000)
    args = parser.parse_args()

    work_dir = Path(tempfile.mkdtemp(prefix="gpu-triage-load-"))
    cluster, info = launch(nodes=args.nodes, pods=args.pods, latency=args.latency)
    assert cluster.stdin is not None
    work = [tuple(p) for p in info["pending"] if p[0].startswith("team-")][: args.workloads]
    kubeconfig = write_kubeconfig(info["url"], work_dir / "kubeconfig", context="load")
    policy = work_dir / "policy.yaml"
    policy.write_text(yaml.safe_dump({"operators": {"users": [OPERATOR]}}))
    database = work_dir / "incidents.sqlite"
    with FakeSlackServer() as fake:
        port = _free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SLACK_", "GPU_TRIAGE_"))}
        env.update(
            SLACK_SIGNING_SECRET=SECRET, SLACK_BOT_TOKEN="xoxb-load", SLACK_API_URL=fake.api_url,
            SLACK_RESPONSE_URL_PREFIXES=fake.url + "/",
            DATABASE_URL=f"sqlite:///{database}", KUBECONFIG=str(kubeconfig),
            GPU_TRIAGE_ACCESS_POLICY=str(policy), PORT=str(port),
        )  # fmt: skip
        bot = subprocess.Popen(
            [sys.executable, "-m", "gpu_triage.cli", "bot", "--host", "127.0.0.1"],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        base = f"http://127.0.0.1:{port}"
        try:
            _wait_ready(base, bot, timeout=300)
            sender = SlackSender(url=base + "/slack/events", fake_url=fake.url)
            print(f"cluster: {args.nodes} nodes, {args.pods} pods, every API read takes "
                  f"{args.latency:g}s; {len(work)} distinct stuck pods asked about; "
                  f"{args.commands} commands per level")  # fmt: skip
            rows = [_round(fake, sender, work, commands=args.commands, flight=f)
                    for f in args.in_flight]  # fmt: skip
        finally:
            bot.send_signal(signal.SIGTERM)
            try:
                bot.wait(30)
            except subprocess.TimeoutExpired:
                bot.kill()
            cluster.stdin.close()
            cluster.wait(30)
    with sqlite3.connect(database) as db:
        per_workload = db.execute(
            "SELECT namespace, name, count(*) FROM incidents GROUP BY namespace, name"
        ).fetchall()
        runs = db.execute("SELECT count(*) FROM triage_runs").fetchone()[0]
    duplicates = sum(n - 1 for _, _, n in per_workload)
    keys = list(rows[0])
    print("| " + " | ".join(keys) + " |")
    print("|" + "---|" * len(keys))
    for row in rows:
        print("| " + " | ".join(f"{row[k]:.0f}" if k != "commands/s" else f"{row[k]:.1f}"
                                  for k in keys) + " |")  # fmt: skip
    total = args.commands * len(rows)
    print(f"{len(per_workload)} incidents for {len(work)} workloads ({duplicates} duplicate), "
          f"{runs} triage runs recorded for {total} commands")  # fmt: skip


if __name__ == "__main__":
    main()
