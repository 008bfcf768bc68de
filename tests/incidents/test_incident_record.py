"""record(): new incident, same cause appends, new cause supersedes, running resolves."""

from __future__ import annotations

from datetime import timedelta

from incidents import IncidentStatus, IncidentStore, Resolution, ThreadRef
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


def test_resolved_incident_is_not_reopened(store: IncidentStore, make_report: MakeReport) -> None:
    first = store.record(make_report(), requested_by="U1", duration_ms=1).incident
    store.record(make_report(None), requested_by="U1", duration_ms=1)
    again = store.record(make_report(), requested_by="U1", duration_ms=1)
    assert first is not None and again.incident is not None
    assert again.created is True and again.incident.id != first.id


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
