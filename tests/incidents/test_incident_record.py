"""record(): new incident, same cause appends, new cause supersedes, running resolves."""

from __future__ import annotations

from datetime import timedelta

import pytest

from incidents import IncidentStatus, IncidentStore, Resolution, ThreadRef
from incidents.errors import InvalidTransitionError
from tests.incidents.incident_helpers import FakeClock, MakeReport
from triage.model import Answer, Layer


def test_blocked_report_opens_an_incident(store: IncidentStore, make_report: MakeReport) -> None:
    report = make_report(
        Layer.QUOTA, codes=("quota-exhausted",), kind="Job", name="train", pod="train-x"
    )
    result = store.record(report, requested_by="U1", duration_ms=42.5, channel="C1")

    assert result.created is True
    assert result.auto_resolved == []
    inc = result.incident
    assert inc is not None
    assert (inc.cluster, inc.namespace, inc.kind, inc.name, inc.pod) == (
        "default",
        "ml",
        "Job",
        "train",
        "train-x",
    )
    assert inc.failing_layer is Layer.QUOTA
    assert inc.fingerprint == report.fingerprint
    assert inc.status is IncidentStatus.OPEN
    assert inc.headline == "blocked at quota"
    assert (inc.requested_by, inc.channel) == ("U1", "C1")
    assert (inc.owner_team, inc.owner_channel, inc.owner_usergroup) == (
        "ml-platform",
        "#ml-platform",
        "S0123",
    )
    assert inc.opened_at.utcoffset() == timedelta(0)
    assert inc.run_count == 1
    assert store.get(inc.id) == inc

    [run] = store.runs(inc.id)
    assert run.id == result.run_id
    assert run.duration_ms == 42.5
    assert run.requested_by == "U1"
    assert run.report == report.model_dump(mode="json")
    assert run.parsed_report() == report


def test_same_cause_appends_a_run(
    store: IncidentStore, make_report: MakeReport, clock: FakeClock
) -> None:
    first = store.record(make_report(), requested_by="U1", duration_ms=1)
    clock.advance(minutes=5)
    again = store.record(
        make_report(headline="still blocked", pod="train-0"), requested_by="U2", duration_ms=2
    )

    assert again.created is False
    assert again.incident is not None and first.incident is not None
    assert again.incident.id == first.incident.id
    assert again.incident.run_count == 2
    assert again.incident.headline == "still blocked"
    assert again.incident.updated_at == clock.now
    assert again.incident.opened_at == first.incident.opened_at
    assert again.incident.requested_by == "U1"  # who opened it stays
    assert [r.requested_by for r in store.runs(first.incident.id)] == ["U1", "U2"]
    assert len(store.list()) == 1


def test_acknowledged_incident_keeps_collecting_runs(
    store: IncidentStore, make_report: MakeReport
) -> None:
    first = store.record(make_report(), requested_by="U1", duration_ms=1).incident
    assert first is not None
    store.set_status(first.id, IncidentStatus.ACKNOWLEDGED, by="oncall")
    again = store.record(make_report(), requested_by="U2", duration_ms=1)
    assert again.incident is not None
    assert (again.incident.id, again.incident.status) == (first.id, IncidentStatus.ACKNOWLEDGED)


def test_new_cause_supersedes_the_open_incident(
    store: IncidentStore, make_report: MakeReport
) -> None:
    old = store.record(
        make_report(Layer.DRIVER, codes=("driver-crash",)), requested_by="U1", duration_ms=1
    )
    new = store.record(make_report(Layer.QUOTA, codes=("quota",)), requested_by="U2", duration_ms=1)

    assert old.incident is not None and new.incident is not None
    assert new.created is True
    assert new.incident.id != old.incident.id
    assert new.auto_resolved == [old.incident.id]
    closed = store.get(old.incident.id)
    assert closed is not None
    assert closed.status is IncidentStatus.RESOLVED
    assert closed.resolution is Resolution.SUPERSEDED
    assert closed.headline == "blocked at driver"  # the old cause is not overwritten
    assert [i.id for i in store.list(status=IncidentStatus.OPEN)] == [new.incident.id]


def test_running_report_resolves_open_incident(
    store: IncidentStore, make_report: MakeReport, clock: FakeClock
) -> None:
    opened = store.record(make_report(), requested_by="U1", duration_ms=1).incident
    assert opened is not None
    clock.advance(hours=2)
    result = store.record(make_report(None), requested_by="U9", duration_ms=3)

    assert result.created is False
    assert result.auto_resolved == [opened.id]
    assert result.incident is not None
    inc = result.incident
    assert (inc.id, inc.status, inc.resolution) == (
        opened.id,
        IncidentStatus.RESOLVED,
        Resolution.AUTO,
    )
    assert (inc.resolved_at, inc.resolved_by) == (clock.now, "U9")
    assert inc.headline == "blocked at scheduling"  # keeps the cause it was about
    assert [r.failing_layer for r in store.runs(opened.id)] == [Layer.SCHEDULING, None]
    assert store.open_incident_for(cluster="default", namespace="ml", name="train-0") is None


def test_running_report_with_nothing_open_is_kept_alone(
    store: IncidentStore, make_report: MakeReport
) -> None:
    result = store.record(make_report(None), requested_by="U1", duration_ms=1)
    assert (result.incident, result.created, result.auto_resolved) == (None, False, [])
    assert result.run_id > 0
    assert store.list() == []


def test_a_resolved_incident_reopens_when_its_cause_returns(
    store: IncidentStore, make_report: MakeReport
) -> None:
    first = store.record(make_report(), requested_by="U1", duration_ms=1).incident
    store.record(make_report(None), requested_by="U1", duration_ms=1)  # running: resolved
    again = store.record(make_report(), requested_by="U2", duration_ms=1)
    assert first is not None and again.incident is not None
    assert again.created is False and again.incident.id == first.id
    assert again.incident.status.value == "open" and again.incident.resolved_at is None
    assert again.incident.reopen_count == 1 and again.incident.reopened_at is not None
    other = store.record(make_report(layer=Layer.DRIVER), requested_by="U1", duration_ms=1)
    assert other.created and other.incident is not None and other.incident.id != first.id


def test_workloads_are_told_apart(store: IncidentStore, make_report: MakeReport) -> None:
    reports = [
        make_report(),
        make_report(name="train-1"),
        make_report(namespace="other"),
        make_report(cluster="west"),
        make_report(kind="Job"),
    ]
    ids = {store.record(r, requested_by=None, duration_ms=1).incident.id for r in reports}  # type: ignore[union-attr]
    assert len(ids) == 5
    west = store.open_incident_for(cluster="west", namespace="ml", name="train-0")
    assert west is not None and west.cluster == "west"
    assert store.open_incident_for(cluster="east", namespace="ml", name="train-0") is None


def test_attach_thread(store: IncidentStore, make_report: MakeReport) -> None:
    inc = store.record(make_report(), requested_by="U1", duration_ms=1, channel="C1").incident
    assert inc is not None
    store.attach_thread(inc.id, thread=ThreadRef("slack", "C2", "1712345678.000100"))
    got = store.get(inc.id)
    assert got is not None and (got.channel, got.thread) == ("C2", "1712345678.000100")


def test_a_run_that_could_not_judge_neither_resolves_nor_opens(
    store: IncidentStore, make_report: MakeReport
) -> None:
    """A triage whose answer is unknown (a read failed) says nothing about the cause: the open
    incident stays open and collects the run; with none open, none is made."""
    opened = store.record(make_report(), requested_by="U1", duration_ms=1).incident
    assert opened is not None
    unknown = make_report(None).model_copy(
        update={"answer": Answer.UNKNOWN, "unknown_layers": [Layer.DRIVER]}
    )
    result = store.record(unknown, requested_by="U2", duration_ms=1)
    assert result.auto_resolved == [] and result.created is False
    assert result.incident is not None and result.incident.id == opened.id
    assert result.incident.status == IncidentStatus.OPEN
    other = unknown.model_copy(update={"pod": unknown.pod.model_copy(update={"name": "other"})})
    alone = store.record(other, requested_by="U2", duration_ms=1)
    assert (alone.incident, alone.created) == (None, False)


def test_a_pod_its_workload_and_a_sweep_share_one_incident(
    store: IncidentStore, make_report: MakeReport
) -> None:
    """The key is the workload the report resolved, whatever the asker typed."""
    sts = ("StatefulSet", "resnet-train")
    by_pod = store.record(
        make_report(name="resnet-train-0", pod="resnet-train-0", workload=sts),
        requested_by="U1", duration_ms=1,
    )  # fmt: skip
    by_owner = store.record(
        make_report(name="sts/resnet-train", kind="StatefulSet", workload=sts),
        requested_by="U2", duration_ms=1,
    )  # fmt: skip
    by_sweep = store.record(
        make_report(name="resnet-train", kind="StatefulSet", workload=sts),
        requested_by=None, duration_ms=1, source="cli",
    )  # fmt: skip
    assert by_pod.created and not by_owner.created and not by_sweep.created
    incident = by_sweep.incident
    assert incident is not None and incident.run_count == 3
    assert (incident.kind, incident.name, incident.pod) == (
        "StatefulSet",
        "resnet-train",
        "resnet-train-0",
    )
    assert [i.id for i in store.list()] == [incident.id]


def test_an_incident_keyed_by_its_pod_before_0006_moves_to_its_workload(
    store: IncidentStore, make_report: MakeReport
) -> None:
    old = store.record(make_report(name="train-0"), requested_by="U1", duration_ms=1).incident
    run = store.record(
        make_report(name="train-0", workload=("Job", "train")), requested_by="U1", duration_ms=1
    )
    assert old is not None and run.incident is not None and run.incident.id == old.id
    assert (run.incident.kind, run.incident.name) == ("Job", "train")


def test_snooze_acknowledges_until_then_and_the_cause_after_it_opens_it_again(
    store: IncidentStore, make_report: MakeReport, clock: FakeClock
) -> None:
    inc = store.record(make_report(), requested_by="U1", duration_ms=1).incident
    assert inc is not None
    snoozed = store.snooze(inc.id, until=timedelta(hours=4), by="U9")
    assert snoozed.status is IncidentStatus.ACKNOWLEDGED and snoozed.acknowledged_by == "U9"
    assert snoozed.snoozed_by == "U9" and snoozed.snoozed_until == clock.now + timedelta(hours=4)
    clock.advance(hours=1)
    during = store.record(make_report(), requested_by="U1", duration_ms=1).incident
    assert during is not None and during.status is IncidentStatus.ACKNOWLEDGED
    clock.advance(hours=4)
    after = store.record(make_report(), requested_by="U1", duration_ms=1).incident
    assert after is not None and after.id == inc.id
    assert after.status is IncidentStatus.OPEN and after.snoozed_until is None


def test_snoozing_a_resolved_incident_or_into_the_past_is_refused(
    store: IncidentStore, make_report: MakeReport, clock: FakeClock
) -> None:
    inc = store.record(make_report(), requested_by="U1", duration_ms=1).incident
    assert inc is not None
    with pytest.raises(InvalidTransitionError, match="has passed"):
        store.snooze(inc.id, until=clock.now - timedelta(minutes=1), by="U9")
    store.set_status(inc.id, IncidentStatus.RESOLVED, by="U9")
    with pytest.raises(InvalidTransitionError, match="resolved"):
        store.snooze(inc.id, until=timedelta(hours=1), by="U9")


def test_stats_give_time_to_acknowledge_and_to_resolve_by_layer(
    store: IncidentStore, make_report: MakeReport, clock: FakeClock
) -> None:
    inc = store.record(make_report(Layer.DRIVER), requested_by="U1", duration_ms=1).incident
    assert inc is not None
    clock.advance(minutes=10)
    store.set_status(inc.id, IncidentStatus.ACKNOWLEDGED, by="U2")
    clock.advance(minutes=50)
    store.set_status(inc.id, IncidentStatus.RESOLVED, by="U2")
    stats = store.stats()
    assert stats.median_time_to_acknowledge_seconds_by_layer[Layer.DRIVER] == 600
    assert stats.median_time_to_resolve_seconds_by_layer[Layer.DRIVER] == 3600
    assert stats.median_time_to_acknowledge_seconds_by_layer[Layer.QUOTA] is None
