"""One bot, several clusters: the real bolt app and store, and one loopback Kubernetes API per
kubeconfig context (KUBECONFIG lists one file per cluster, merged as kubectl does).

`east` and `west` hold the same namespaces and pod names; `gone` refuses connections."""

from __future__ import annotations

import argparse
import copy
import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from slack_sdk import WebClient

from bot.core.alerts import AlertConfig, Alerter
from bot.slack.alerts import SlackAlerts
from bot.slack.testing import SECRET, FakeSlack, SlackSender
from gpu_triage.alerting import AlertLoop
from gpu_triage.cmd_bot import Clusters, _sources
from gpu_triage.metrics import Metrics
from gpu_triage.service import TriageService
from gpu_triage.settings import load_settings
from incidents.store import IncidentStore
from kube.testing import FakeApiServer, write_kubeconfig
from tests.bot.bot_cluster import objects
from tests.bot.conftest import serving

POLICY: dict[str, Any] = {
    "operators": {"users": ["UOPS"], "channels": ["COPS", "CWEST"]},
    "tenants": [
        # team-a's namespace is theirs in east only; in west another team runs `team-a`.
        {"name": "team-a", "namespaces": ["team-a"], "users": ["UTENA"], "clusters": ["east"]},
    ],
    "defaults": {"clusters": {"CWEST": "west"}},
}


def _refused_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = int(s.getsockname()[1])
    s.close()  # nothing listens here: connections are refused at once
    return port


def _more_pending(n: int) -> list[dict[str, Any]]:
    """`n` more pending GPU pods in team-a, each its own triage."""
    template = next(o for o in objects() if o["metadata"].get("name") == "train-x")
    pods = []
    for i in range(n):
        pod = copy.deepcopy(template)
        pod["metadata"].update(name=f"job-{i}", uid=f"uid-job-{i}")
        pods.append(pod)
    return pods


@dataclass
class Fleet:
    slack: SlackSender
    fake: FakeSlack
    store: IncidentStore
    clusters: Clusters
    service: TriageService
    east: FakeApiServer
    west: FakeApiServer

    def private(self, n: int) -> str:
        """The text of the `n`th private reply (1-based), once it came."""
        self.fake.wait(lambda: len(self.fake.of("response")) >= n, timeout=20)
        args = self.fake.of("response")[n - 1].args
        return str(args.get("text", "")) + json.dumps(args.get("blocks") or [])


@pytest.fixture
def fleet(
    fake: FakeSlack, store: IncidentStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Fleet]:
    for var in ("SLACK_APP_TOKEN", "PORT", "DATABASE_URL", "KUBECONFIG"):
        monkeypatch.delenv(var, raising=False)
    with (
        FakeApiServer([*objects(), *_more_pending(4)]) as east,
        FakeApiServer([*objects(), *_more_pending(4)]) as west,
    ):
        files = [
            east.write_kubeconfig(tmp_path / "east.yaml", context="east"),
            west.write_kubeconfig(tmp_path / "west.yaml", context="west"),
            write_kubeconfig(
                f"http://127.0.0.1:{_refused_port()}", tmp_path / "gone.yaml", context="gone"
            ),
        ]
        settings = load_settings(
            slack_signing_secret=SECRET,
            slack_bot_token="xoxb-test",
            slack_api_url=fake.api_url,
            response_urls=fake.url + "/",
            workers=2,
            max_pending=16,
        )
        clusters = _sources(
            SimpleNamespace(snapshot=None, cluster_name=None, clusters="east,west,gone"),
            argparse.Namespace(kubeconfig=":".join(map(str, files)), context=None),
        )
        metrics = Metrics(store=store, caches=clusters.caches)
        service = TriageService(
            source_for=clusters.source_for, store=store, metrics=metrics, statuses=clusters.statuses
        )
        try:
            with serving(settings, fake, service=service, store=store, policy=POLICY) as (
                _app,
                server,
            ):
                for name in ("east", "west"):
                    assert clusters.source_for(name).wait_synced(10)  # type: ignore[attr-defined]
                yield Fleet(
                    slack=SlackSender(
                        url=f"http://127.0.0.1:{server.port}/slack/events", fake_url=fake.url
                    ),
                    fake=fake,
                    store=store,
                    clusters=clusters,
                    service=service,
                    east=east,
                    west=west,
                )
        finally:
            clusters.close()


def test_the_same_pod_in_two_clusters_is_two_incidents_in_two_threads(fleet: Fleet) -> None:
    fleet.slack.command("why-pending train-x -n team-a --cluster east")
    east_post = fleet.fake.wait_posts(1)[0]
    fleet.slack.command("why-pending train-x -n team-a --cluster west")
    west_post = fleet.fake.wait_posts(2)[1]
    assert west_post.args.get("thread_ts") is None  # a thread of its own, not east's
    fleet.slack.command("why-pending train-x -n team-a --cluster east")
    again = fleet.fake.wait_posts(3)[2]
    east_incident = fleet.store.open_incident_for(
        cluster="east", namespace="team-a", name="train-x"
    )
    west_incident = fleet.store.open_incident_for(
        cluster="west", namespace="team-a", name="train-x"
    )
    assert east_incident is not None and west_incident is not None
    assert east_incident.id != west_incident.id
    assert again.args["thread_ts"] == east_incident.thread  # east's follow-up in east's thread
    assert west_incident.thread != east_incident.thread
    assert "east" in json.dumps(east_post.args["blocks"])
    assert "west" in json.dumps(west_post.args["blocks"])

    fleet.slack.command("incidents", channel="DOPS")
    listed = fleet.private(1)
    assert "team-a/train-x` in `east`" in listed and "team-a/train-x` in `west`" in listed
    fleet.slack.command("incidents --cluster west", channel="DOPS")
    assert "`west`" not in fleet.private(2) and "team-a/train-x" in fleet.private(2)
    assert fleet.store.list(cluster="east")[0].cluster == "east"


def test_a_channel_default_cluster_and_a_tenant_grant_per_cluster(fleet: Fleet) -> None:
    fleet.slack.command("why-pending train-x -n team-a", channel="CWEST")
    fleet.fake.wait_posts(1)
    assert fleet.store.open_incident_for(cluster="west", namespace="team-a", name="train-x")
    assert not fleet.store.open_incident_for(cluster="east", namespace="team-a", name="train-x")

    # team-a's grant holds in east only: in west their namespace answers like a missing pod.
    fleet.slack.command("why-pending train-x -n team-a --cluster west", user="UTENA", channel="D1")
    refused = fleet.private(1)
    fleet.slack.command("why-pending no-such -n team-a --cluster west", user="UTENA", channel="D1")
    missing = fleet.private(2)
    assert refused.replace("train-x", "X") == missing.replace("no-such", "X")
    fleet.slack.command("why-pending train-x -n team-a --cluster east", user="UTENA", channel="D1")
    assert "Blocked at scheduling" in fleet.private(3)
    fleet.slack.command("why-pending train-x -n team-a --cluster mars", user="UTENA", channel="D1")
    assert "I don't serve a cluster named `mars`" in fleet.private(4)


def test_an_unreachable_cluster_answers_at_once_and_clusters_shows_why(fleet: Fleet) -> None:
    fleet.slack.command("why-pending train-x -n team-a --cluster gone", channel="DOPS")
    gone = fleet.private(1)
    assert "could not be read" in gone and "connection refused" in gone
    assert fleet.store.list() == []  # nothing recorded for a cluster that was not read

    fleet.slack.command("clusters", channel="DOPS")
    shown = fleet.private(2)
    lines = shown.split("\n")
    assert lines[0].startswith("• `east` (default here): :white_check_mark: synced, 1 nodes, 10")
    assert lines[1].startswith("• `west`: :white_check_mark: synced")
    assert lines[2].startswith("• `gone`: :x: unreachable (cannot reach the Kubernetes API")
    fleet.slack.command("clusters", channel="CWEST")
    assert fleet.private(3).split("\n")[1].startswith("• `west` (default here)")
    # a tenant sees which clusters exist and whether they answer, not their size or servers
    fleet.slack.command("clusters", user="UTENA", channel="D1")
    tenant = fleet.private(4)
    assert "`gone`: :x: unreachable" in tenant
    assert "nodes" not in tenant and "127.0.0.1" not in tenant


def test_a_slow_cluster_holds_only_its_lane_of_the_workers(fleet: Fleet) -> None:
    # Two workers: west's triages may use one, so east is answered while west crawls.
    fleet.west.latency = 2.0  # every read west's triages make now takes two seconds
    for i in range(3):
        fleet.slack.command(f"why-pending job-{i} -n team-a --cluster west", channel="DOPS")
    fleet.slack.command("why-pending train-x -n team-a --cluster east", channel="DOPS")
    first = fleet.private(1)
    assert "Blocked at scheduling" in first and "east" in first
    assert len(fleet.fake.of("response")) == 1  # west's three are still on their way
    for n in (2, 3, 4):
        assert "west" in fleet.private(n)


def test_the_watch_loop_sweeps_every_cluster_and_alerts_each_apart(fleet: Fleet) -> None:
    config = AlertConfig.model_validate({"channels": {"#gpu-help": {"min_workloads": 1}}})
    alerter = Alerter(
        sink=SlackAlerts(WebClient(token="xoxb-test", base_url=fleet.fake.api_url)),
        groups=fleet.store.groups,
        config=config,
    )
    loop = AlertLoop(
        service=fleet.service,  # type: ignore[arg-type]
        alerter=alerter,
        metrics=fleet.service.metrics,
        interval=60,
        clusters=fleet.clusters.watched,
    )
    result = loop.once()  # gone fails its sweep (logged); east and west do not wait for it
    assert result is not None and result.posted == 2
    posts = fleet.fake.of("chat.postMessage")
    texts = sorted(str(p.args["text"]) for p in posts)
    assert [t.split(":")[0] for t in texts] == [
        "scheduling in cluster east",
        "scheduling in cluster west",
    ]
    assert "--cluster west" in json.dumps([p.args["blocks"] for p in posts])
    again = loop.once()
    assert again is not None and again.posted == 0  # in place: nothing posted twice
    assert fleet.service.metrics is not None
    body = fleet.service.metrics.render()[0].decode()
    assert 'gpu_triage_stuck_gpu_workloads{cluster="east",layer="scheduling"}' in body
    assert 'gpu_triage_stuck_gpu_workloads{cluster="west",layer="scheduling"}' in body
