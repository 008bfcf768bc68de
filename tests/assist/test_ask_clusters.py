"""`/gpu ask` reads the cluster it is asked about: the asker's channel's default cluster (the
access policy's `defaults.clusters`), through the bot's own service, with a model or without.

`east` and `west` hold the same namespaces; only east runs `train-x`."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from langchain_core.messages import ToolMessage

from assist.ask import Assistant
from bot.slack.app import TriageApp
from bot.slack.testing import FakeSlack, SlackSender
from gpu_triage.service import TriageService
from gpu_triage.settings import Settings
from incidents.store import IncidentStore
from tests.assist.fakes import call, scripted
from tests.bot.bot_cluster import objects
from tests.bot.conftest import serving
from triage import ClusterSource, MemorySource

POLICY: dict[str, Any] = {
    "operators": {"users": ["UOPS"]},
    "defaults": {"clusters": {"CWEST": "west", "CEAST": "east"}},
}
QUESTION = "ask why is pod train-x pending in namespace team-a"


class Counted(MemorySource):
    """A cluster that counts the pods read from it."""

    pod_reads = 0

    def get(self, kind: str, name: str, *, namespace: str | None = None) -> dict[str, Any] | None:
        if kind == "Pod":
            self.pod_reads += 1
        return super().get(kind, name, namespace=namespace)


@dataclass
class Two:
    app: TriageApp
    slack: SlackSender
    service: TriageService
    clusters: dict[str, Counted]


@pytest.fixture
def two(fake: FakeSlack, store: IncidentStore, settings: Settings) -> Iterator[Two]:
    without = [o for o in objects() if o["metadata"].get("name") != "train-x"]
    clusters = {
        "east": Counted(objects(), cluster_name="east"),
        "west": Counted(without, cluster_name="west"),
    }

    def source_for(cluster: str | None) -> ClusterSource:
        if cluster not in (None, *clusters):
            raise LookupError(cluster)
        return clusters[cluster or "east"]

    service = TriageService(source_for=source_for, store=store)
    with serving(settings, fake, service=service, store=store, policy=POLICY) as (app, server):
        url = f"http://127.0.0.1:{server.port}/slack/events"
        yield Two(app, SlackSender(url=url, fake_url=fake.url), service, clusters)


def test_a_model_reads_the_channels_cluster_not_the_default(two: Two, fake: FakeSlack) -> None:
    model = scripted(
        call("why_pending", namespace="team-a", name="train-x"),
        "There is no pod train-x in team-a that I can see.",
    )
    two.app.core.assistant = Assistant(backend=two.service, model=model)
    two.slack.command(QUESTION, channel="CWEST")
    answer = fake.wait_posts(1)[0].args["text"]
    assert two.clusters["west"].pod_reads > 0 and two.clusters["east"].pod_reads == 0
    [tool] = [m for m in model.seen[1] if isinstance(m, ToolMessage)]
    assert "not_found" in str(tool.content)  # west has no train-x; east would have answered
    assert "no pod train-x" in answer


def test_without_a_model_too(two: Two, fake: FakeSlack) -> None:
    two.slack.command(QUESTION, channel="CEAST")
    assert "Blocked at scheduling" in str(fake.wait_posts(1)[0].args)
    two.slack.command(QUESTION, channel="CWEST")
    assert "No pod or workload named `train-x`" in fake.wait_posts(2)[1].args["text"]
