"""Two `gpu-triage bot` processes on one PostgreSQL, live against loopback Kubernetes APIs,
answering Slack over HTTP as two replicas behind a Service would.

Replica A serves `east`; replica B serves `east` and `west`. What a user sees: a command
reaching a replica that does not serve its cluster is answered by one that does; a replica
killed mid-triage is replaced by the other, and the command is answered exactly once."""

from __future__ import annotations

import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from sqlalchemy import create_engine, text

from bot.slack.testing import FakeSlack, SlackSender
from incidents import IncidentStore
from kube.testing import FakeApiServer
from tests.bot.bot_cluster import objects
from tests.bot.test_bot_cli import SECRET, _bot, _env, _free_port

pytestmark = pytest.mark.postgres

POLICY = {"operators": {"users": ["UOPS"], "channels": ["COPS"]}}
LEASE = 3.0  # seconds a replica holds a command without renewing it


@dataclass
class Replica:
    proc: subprocess.Popen[str]
    port: int
    slack: SlackSender

    def ask(self, text: str, *, trigger: str | None = None) -> str:
        """Send `/gpu text` from a DM (answers are private, by response URL); its URL."""
        body = self.slack.command_body(text, user="UOPS", channel="DOPS", trigger=trigger)
        url = dict(urllib.parse.parse_qsl(body))["response_url"]
        reply = self.slack.post(body, content_type="application/x-www-form-urlencoded")
        assert reply.status == 200, reply.body
        return urllib.parse.urlsplit(url).path


@dataclass
class Pair:
    a: Replica
    b: Replica
    east: FakeApiServer
    west: FakeApiServer
    fake: FakeSlack
    db: str

    def answers(self, path: str) -> list[str]:
        return [str(c.args.get("text", "")) for c in self.fake.of("response") if c.path == path]

    def incidents(self) -> list[tuple[str, str, str]]:
        engine = create_engine(self.db)
        try:
            with engine.connect() as conn:
                rows = conn.execute(text("SELECT cluster, namespace, name FROM incidents"))
                return sorted((str(c), str(n), str(m)) for c, n, m in rows)
        finally:
            engine.dispose()


def _start(tmp: Path, fake: FakeSlack, db: str, kubeconfig: str, clusters: str) -> Replica:
    policy = tmp / "policy.yaml"
    policy.write_text(yaml.safe_dump(POLICY))
    port = _free_port()
    env = _env(
        SLACK_SIGNING_SECRET=SECRET,
        SLACK_BOT_TOKEN="xoxb-test",
        SLACK_API_URL=fake.api_url,
        SLACK_RESPONSE_URL_PREFIXES=fake.url + "/",
        DATABASE_URL=db,
        KUBECONFIG=kubeconfig,
        GPU_TRIAGE_CLUSTERS=clusters,
        GPU_TRIAGE_JOB_LEASE=str(LEASE),
        GPU_TRIAGE_JOB_POLL="0.2",
    )
    proc = _bot("--host", "127.0.0.1", "--port", str(port), "--access-policy", str(policy), env=env)
    return Replica(
        proc, port, SlackSender(url=f"http://127.0.0.1:{port}/slack/events", fake_url=fake.url)
    )


def _ready(replica: Replica) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{replica.port}/readyz", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        assert replica.proc.poll() is None, replica.proc.communicate()[1]
        assert time.monotonic() < deadline, "replica never became ready"
        time.sleep(0.2)


@pytest.fixture
def pair(fake: FakeSlack, pg_url: str, tmp_path: Path) -> Iterator[Pair]:
    with IncidentStore.from_url(pg_url) as store:
        store.upgrade()
    with FakeApiServer(objects()) as east, FakeApiServer(objects()) as west:
        kubeconfig = ":".join(
            str(p)
            for p in (
                east.write_kubeconfig(tmp_path / "east.yaml", context="east"),
                west.write_kubeconfig(tmp_path / "west.yaml", context="west"),
            )
        )
        a = _start(tmp_path, fake, pg_url, kubeconfig, "east")
        b = _start(tmp_path, fake, pg_url, kubeconfig, "east,west")
        try:
            _ready(a)
            _ready(b)
            yield Pair(a, b, east, west, fake, pg_url)
        finally:
            for r in (a, b):
                if r.proc.poll() is None:
                    r.proc.send_signal(signal.SIGTERM)
                r.proc.communicate(timeout=30)


def test_a_command_for_a_cluster_served_by_the_other_replica_is_answered_there(
    pair: Pair,
) -> None:
    # A lists the whole deployment's clusters once it heard from B.
    def a_knows_west() -> bool:
        path = pair.a.ask("clusters")
        pair.fake.wait(lambda: bool(pair.answers(path)), timeout=20)
        return "west" in pair.answers(path)[0]

    deadline = time.monotonic() + 20
    while not a_knows_west():
        assert time.monotonic() < deadline, "replica A never heard of cluster west"
        time.sleep(0.5)

    path = pair.a.ask("why-pending train-x -n team-a --cluster west")
    pair.fake.wait(lambda: bool(pair.answers(path)), timeout=30)
    time.sleep(2 * LEASE)  # nothing more comes, from either replica
    [answer] = pair.answers(path)
    assert "train-x" in answer and "I don't serve" not in answer
    assert pair.incidents() == [("west", "team-a", "train-x")]
    assert not any("/api/v1/namespaces/team-a/events" in p for p, _ in pair.east.requests)


def test_a_replica_killed_mid_triage_is_replaced_and_the_command_answered_once(
    pair: Pair,
) -> None:
    pair.east.latency = 120.0  # the triage on A hangs on the API server...
    seen = len(pair.east.requests)
    path = pair.a.ask("why-pending train-x -n team-a")
    pair.fake.wait(lambda: len(pair.east.requests) > seen, timeout=20)
    time.sleep(0.5)
    pair.a.proc.kill()  # ...and A dies before answering
    pair.a.proc.communicate(timeout=30)
    pair.east.latency = 0.0
    assert pair.answers(path) == []

    pair.fake.wait(lambda: bool(pair.answers(path)), timeout=10 * LEASE)
    time.sleep(2 * LEASE)
    [answer] = pair.answers(path)
    assert "train-x" in answer
    assert pair.incidents() == [("east", "team-a", "train-x")]


def test_the_same_command_at_both_replicas_is_answered_once(pair: Pair) -> None:
    """A retry that the Service routes to the other replica."""
    first = pair.a.ask("why-pending train-x -n team-a", trigger="trigger-twice")
    second = pair.b.ask("why-pending train-x -n team-a", trigger="trigger-twice")
    pair.fake.wait(lambda: bool(pair.answers(first) or pair.answers(second)), timeout=30)
    time.sleep(2 * LEASE)
    assert len(pair.answers(first)) + len(pair.answers(second)) == 1
