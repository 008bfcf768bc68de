"""Fleet-view alerts against a loopback Slack: one thread per root cause in the owner's channel,
posted once, updated in place as members come and go, resolved when empty; silent when
nothing changed, after a restart, and with two replicas on one database."""

from __future__ import annotations

import re
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import pytest
from slack_sdk import WebClient

from bot.core.alerts import AlertConfig, AlertConfigError, Alerter, CycleResult, load_alerts
from bot.slack.alerts import SlackAlerts
from bot.slack.testing import FakeSlack
from incidents import IncidentStore
from triage import load_snapshot
from triage.fleet import Group, Sweep, sweep

FIXTURE = Path(__file__).parents[1] / "fixtures" / "fleet-many-causes.yaml"
NOON = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
CONFIG = AlertConfig.model_validate(
    {"channels": {"#gpu-infra": {"grow_by": 2}, "#gpu-capacity": {"min_workloads": 1}}}
)


@pytest.fixture(scope="module")
def fleet() -> Sweep:
    return sweep(load_snapshot(FIXTURE))


def alerter(fake: FakeSlack, store: IncidentStore, config: AlertConfig = CONFIG) -> Alerter:
    client = WebClient(token="xoxb-test", base_url=fake.api_url)
    return Alerter(sink=SlackAlerts(client), groups=store.groups, config=config, clock=lambda: NOON)


def with_members(s: Sweep, key: str, members: list) -> Sweep:  # type: ignore[type-arg]
    groups = []
    for g in s.groups:
        if g.key == key:
            g = g.model_copy(update={"members": members, "workloads": len(members),
                                     "gpus": sum(m.gpus for m in members)})  # fmt: skip
        groups.append(g)
    return s.model_copy(update={"groups": [g for g in groups if g.members]})


def driver(s: Sweep) -> Group:
    return next(g for g in s.groups if g.layer.value == "driver")


def test_new_groups_post_once_to_opted_in_channels_only(
    fake: FakeSlack, store: IncidentStore, fleet: Sweep
) -> None:
    a = alerter(fake, store)
    first = a.cycle(fleet)
    posts = fake.of("chat.postMessage")
    channels = sorted(p.args["channel"] for p in posts)
    # driver -> #gpu-infra; the Kueue group -> #gpu-capacity; the others' channels did not opt in
    assert channels == ["#gpu-capacity", "#gpu-infra"] and first.posted == 2
    text = str(next(p for p in posts if p.args["channel"] == "#gpu-infra").args["blocks"])
    assert "NVIDIA driver pods failing" in text and "gpu-a100-01" in text
    assert "research/fold-a100" in text and "/gpu why-pending" in text
    assert a.cycle(fleet).posted == 0
    assert len(fake.of("chat.postMessage")) == 2 and not fake.of("chat.update")


def test_members_coming_and_going_update_the_thread_in_place_then_resolve(
    fake: FakeSlack, store: IncidentStore, fleet: Sweep
) -> None:
    a = alerter(fake, store)
    a.cycle(fleet)
    root = next(p for p in fake.of("chat.postMessage") if p.args["channel"] == "#gpu-infra")
    d = driver(fleet)
    fewer = with_members(fleet, d.key, d.members[:2])
    assert a.cycle(fewer).updated == 1
    [update] = fake.of("chat.update")
    assert update.args["ts"] and "2 workload(s)" in str(update.args["blocks"])
    assert len(fake.of("chat.postMessage")) == 2  # updated in place, no new post
    assert a.cycle(fewer).updated == 0  # no change, no call
    # Growth past the channel's step (2) is said once in the thread, broadcast.
    a.cycle(fleet)
    replies = [p for p in fake.of("chat.postMessage") if p.args.get("thread_ts")]
    assert len(replies) == 1 and "grew from 2 to 11" in replies[0].args["text"]
    # Every member gone: the message says resolved, and the thread hears it once.
    gone = with_members(fleet, d.key, [])
    assert a.cycle(gone).resolved == 1
    last = fake.of("chat.update")[-1]
    assert "resolved" in str(last.args["blocks"]) and last.args["ts"] == update.args["ts"]
    assert a.cycle(gone).resolved == 0
    assert root.args["channel"] == "#gpu-infra"


def test_a_restarted_bot_does_not_repost(fake: FakeSlack, tmp_path: Path, fleet: Sweep) -> None:
    url = f"sqlite:///{tmp_path / 'alerts.sqlite'}"
    with IncidentStore.from_url(url) as store:
        store.upgrade()
        alerter(fake, store).cycle(fleet)
    with IncidentStore.from_url(url) as restarted:
        again = alerter(fake, restarted).cycle(fleet)
    assert again.posted == 0 and len(fake.of("chat.postMessage")) == 2


def test_two_replicas_on_one_database_post_each_group_once(
    fake: FakeSlack, tmp_path: Path, fleet: Sweep
) -> None:
    url = f"sqlite:///{tmp_path / 'alerts.sqlite'}"
    one, two = IncidentStore.from_url(url), IncidentStore.from_url(url)
    one.upgrade()
    try:
        a, b = alerter(fake, one), alerter(fake, two)
        assert a.cycle(fleet).posted + b.cycle(fleet).posted == 2
        d = driver(fleet)
        fewer = with_members(fleet, d.key, d.members[:1])
        assert a.cycle(fewer).updated + b.cycle(fewer).updated == 1
        assert len(fake.of("chat.postMessage")) == 2 and len(fake.of("chat.update")) == 1
    finally:
        one.close()
        two.close()


@pytest.mark.postgres
def test_two_replicas_racing_on_postgresql_post_update_and_resolve_each_group_once(
    fake: FakeSlack, pg_url: str, fleet: Sweep
) -> None:
    """Two bot processes' alerters run the same cycle at the same moment against one
    PostgreSQL: the database's constraints decide who posts, updates and resolves."""
    one, two = IncidentStore.from_url(pg_url), IncidentStore.from_url(pg_url)
    one.upgrade()
    replicas = [alerter(fake, one), alerter(fake, two)]

    def race(s: Sweep) -> list[CycleResult]:
        start = threading.Barrier(len(replicas))

        def cycle(a: Alerter) -> CycleResult:
            start.wait()
            return a.cycle(s)

        with ThreadPoolExecutor(len(replicas)) as pool:
            return list(pool.map(cycle, replicas))

    try:
        for _ in range(3):
            race(fleet)
        assert len(fake.of("chat.postMessage")) == 2
        d = driver(fleet)
        fewer = with_members(fleet, d.key, d.members[:1])
        assert sum(r.updated for r in race(fewer) + race(fewer)) == 1
        assert len(fake.of("chat.update")) == 1
        gone = with_members(fleet, d.key, [])
        assert sum(r.resolved for r in race(gone) + race(gone)) == 1
        assert len(fake.of("chat.update")) == 2
        assert len(fake.of("chat.postMessage")) == 3  # the two alerts, one "resolved" reply
    finally:
        one.close()
        two.close()


def test_quiet_hours_and_the_hourly_limit_hold_new_posts_back(
    fake: FakeSlack, store: IncidentStore, fleet: Sweep
) -> None:
    quiet = AlertConfig.model_validate(
        {"channels": {"#gpu-infra": {"quiet_hours": "11:00-13:00"},
                      "#gpu-capacity": {"max_posts_per_hour": 0}}}
    )  # fmt: skip
    held = alerter(fake, store, quiet).cycle(fleet)
    assert held.posted == 0 and not fake.of("chat.postMessage")
    assert sorted(held.held) == [
        "#gpu-capacity: 0 posts in the last hour",
        "#gpu-infra: quiet hours",
    ]
    later = alerter(fake, store, CONFIG)  # quiet hours over: the held group is posted now
    assert later.cycle(fleet).posted == 2


def test_a_slack_failure_releases_the_claim_for_the_next_cycle(
    fake: FakeSlack, store: IncidentStore, fleet: Sweep
) -> None:
    fake.not_in_channel.add("#gpu-infra")
    assert alerter(fake, store).cycle(fleet).posted == 1
    fake.not_in_channel.clear()
    assert alerter(fake, store).cycle(fleet).posted == 1


def test_a_bad_alerts_file_is_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "alerts.yaml"
    bad.write_text("channels:\n  '#x': {quiet_hours: 'late'}\n")
    with pytest.raises(AlertConfigError, match="quiet_hours must look like 22:00-07:00"):
        load_alerts(bad)
    with pytest.raises(AlertConfigError, match=r"no-such\.yaml"):
        load_alerts(tmp_path / "no-such.yaml")


def test_an_incomplete_sweep_resolves_nothing(
    fake: FakeSlack, store: IncidentStore, fleet: Sweep
) -> None:
    a = alerter(fake, store)
    a.cycle(fleet)
    broken = fleet.model_copy(update={"groups": [], "errors": ["team-a/x: cluster unreachable"]})
    result = a.cycle(broken)
    assert result.resolved == 0 and not fake.of("chat.update") and result.held
    assert len(store.groups.list(status="open")) == len(fleet.groups)


def test_the_watch_loop_survives_an_unreachable_cluster_and_counts_alerts(
    fake: FakeSlack, store: IncidentStore
) -> None:
    from gpu_triage.alerting import AlertLoop
    from gpu_triage.metrics import Metrics
    from gpu_triage.service import TriageService
    from triage import UnavailableError

    state = {"up": False}

    def source_for(cluster: str | None):  # type: ignore[no-untyped-def]
        if not state["up"]:
            raise UnavailableError("cannot reach the Kubernetes API at https://10.0.0.1")
        return load_snapshot(FIXTURE)

    metrics = Metrics(store=store)
    service = TriageService(source_for=source_for, store=store, metrics=metrics)
    loop = AlertLoop(service=service, alerter=alerter(fake, store), metrics=metrics, interval=60)
    assert loop.once() is None  # logged, retried next interval
    state["up"] = True
    result = loop.once()
    assert result is not None and result.posted == 2
    body = metrics.render()[0].decode()
    assert 'gpu_triage_alerts_total{action="posted"} 2.0' in body
    assert re.search(r'gpu_triage_stuck_gpu_workloads\{cluster="[^"]+",layer="driver"\} 11.0', body)
