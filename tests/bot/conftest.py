"""Fixtures: a fake Slack on loopback, the real store, service and engine, the real bolt app."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from slack_sdk import WebClient

from bot.core.policy import AccessPolicy
from bot.slack.app import TriageApp, create_app
from bot.slack.server import Server
from bot.slack.testing import SECRET, FakeSlack, FakeSlackServer, SlackSender
from gpu_triage.metrics import Metrics
from gpu_triage.service import TriageRun, TriageService
from gpu_triage.settings import Settings, load_settings
from incidents.store import IncidentStore
from tests.bot.bot_cluster import SlowSource, objects
from tests.incidents.conftest import pg_url  # noqa: F401  (the PostgreSQL fixture, for the replica tests)
from triage import ClusterSource

POLICY: dict[str, Any] = {
    "operators": {"users": ["UOPS"], "channels": ["COPS"]},
    "tenants": [
        {
            "name": "team-a",
            "namespaces": ["team-a"],
            "users": ["UTENA"],
            "usergroups": ["STEAMA"],
            "channels": ["CTEAMA"],
        },
        {"name": "team-b", "namespaces": ["team-b"], "users": ["UTENB"]},
    ],
}


class CountingService(TriageService):
    """The real service, counting how often it ran (to prove retries triage once)."""

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self.count = 0
        self._lock = threading.Lock()

    def run(self, **kw: Any) -> TriageRun:
        with self._lock:
            self.count += 1
        return super().run(**kw)


@dataclass
class Bot:
    slack: SlackSender
    fake: FakeSlack
    app: TriageApp
    server: Server
    service: CountingService
    store: IncidentStore
    source: SlowSource
    base_url: str

    def thread_of(self, name: str, namespace: str = "team-a") -> str:
        """Wait until the incident of `namespace/name` has its Slack thread; return its ts."""

        def attached() -> bool:
            inc = self.store.open_incident_for(cluster="demo", namespace=namespace, name=name)
            return inc is not None and inc.thread is not None

        self.fake.wait(attached)
        inc = self.store.open_incident_for(cluster="demo", namespace=namespace, name=name)
        assert inc is not None and inc.thread is not None
        return inc.thread


@pytest.fixture
def fake() -> Iterator[FakeSlack]:
    with FakeSlackServer() as state:
        yield state


@pytest.fixture
def store(tmp_path: Path) -> IncidentStore:
    s = IncidentStore.from_url(f"sqlite:///{tmp_path / 'incidents.sqlite'}")
    s.upgrade()
    return s


@pytest.fixture
def settings(fake: FakeSlack, monkeypatch: pytest.MonkeyPatch) -> Settings:
    for var in ("SLACK_APP_TOKEN", "PORT", "DATABASE_URL"):
        monkeypatch.delenv(var, raising=False)
    return load_settings(
        slack_signing_secret=SECRET,
        slack_bot_token="xoxb-test",
        slack_api_url=fake.api_url,
        response_urls=fake.url + "/",
        workers=4,
        max_pending=8,
    )


@pytest.fixture
def delay() -> float:
    return 0.0


@pytest.fixture
def bot(fake: FakeSlack, store: IncidentStore, settings: Settings, delay: float) -> Iterator[Bot]:
    with running_bot(settings, fake, store, policy=POLICY, delay=delay) as running:
        yield running


@contextmanager
def running_bot(
    settings: Settings,
    fake: FakeSlack,
    store: IncidentStore,
    *,
    policy: dict[str, Any],
    delay: float = 0.0,
) -> Iterator[Bot]:
    """The bot serving the demo cluster (as "demo" or by default) under `policy`, each read
    taking `delay` seconds."""
    source = SlowSource(objects(), delay=delay)

    def source_for(cluster: str | None) -> ClusterSource:
        if cluster not in (None, "demo"):
            raise LookupError(cluster)
        return source

    service = CountingService(source_for=source_for, store=store, metrics=Metrics(store=store))
    with serving(settings, fake, service=service, store=store, policy=policy) as (app, server):
        base = f"http://127.0.0.1:{server.port}"
        yield Bot(
            slack=SlackSender(url=base + "/slack/events", fake_url=fake.url),
            fake=fake,
            app=app,
            server=server,
            service=service,
            store=store,
            source=source,
            base_url=base,
        )


@contextmanager
def serving(
    settings: Settings,
    fake: FakeSlack,
    *,
    service: TriageService,
    store: IncidentStore,
    policy: dict[str, Any],
) -> Iterator[tuple[TriageApp, Server]]:
    """The real app over `service`, served on loopback and talking to the fake Slack."""
    app = create_app(
        settings,
        service=service,
        store=store,
        policy=AccessPolicy.model_validate(policy),
        client=WebClient(token="xoxb-test", base_url=fake.api_url),
    )
    metrics = service.metrics or Metrics(store=store)
    server = Server(app, host="127.0.0.1", port=0, metrics=metrics.render)
    server.start()
    try:
        yield app, server
    finally:
        server.stop()
