"""Status lifecycle, listing filters and statistics."""

from __future__ import annotations

import pytest

from incidents import (
    IncidentNotFoundError,
    IncidentStatus,
    IncidentStore,
    InvalidTransitionError,
    Resolution,
    ThreadRef,
)
from tests.incidents.incident_helpers import FakeClock, MakeReport
from triage.model import Layer


def test_lifecycle(store: IncidentStore, make_report: MakeReport, clock: FakeClock) -> None:
    inc = store.record(make_report(), requested_by="U1", duration_ms=1).incident
    assert inc is not None
    clock.advance(minutes=1)
    acked = store.set_status(inc.id, IncidentStatus.ACKNOWLEDGED, by="alice")
    assert (acked.status, acked.acknowledged_by, acked.acknowledged_at) == (
        IncidentStatus.ACKNOWLEDGED,
        "alice",
        clock.now,
    )
    assert store.set_status(inc.id, IncidentStatus.ACKNOWLEDGED, by="bob") == acked  # no-op
    clock.advance(minutes=1)
    done = store.set_status(inc.id, IncidentStatus.RESOLVED, by="bob")
    assert (done.status, done.resolution, done.resolved_by, done.resolved_at) == (
        IncidentStatus.RESOLVED,
        Resolution.MANUAL,
        "bob",
        clock.now,
    )
    assert done.acknowledged_by == "alice"
    with pytest.raises(
        InvalidTransitionError, match=r"incident \d+ is resolved; it cannot become open"
    ):
        store.set_status(inc.id, IncidentStatus.OPEN, by="bob")
    with pytest.raises(InvalidTransitionError):
        store.set_status(inc.id, IncidentStatus.ACKNOWLEDGED, by="bob")


def test_acknowledged_cannot_go_back_to_open(store: IncidentStore, make_report: MakeReport) -> None:
    inc = store.record(make_report(), requested_by="U1", duration_ms=1).incident
    assert inc is not None
    store.set_status(inc.id, IncidentStatus.ACKNOWLEDGED, by="alice")
    with pytest.raises(InvalidTransitionError):
        store.set_status(inc.id, IncidentStatus.OPEN, by="alice")


def test_unknown_incident(store: IncidentStore) -> None:
    assert store.get(999) is None
    assert store.runs(999) == []
    with pytest.raises(IncidentNotFoundError, match=r"^incident 999 does not exist$"):
        store.set_status(999, IncidentStatus.RESOLVED, by="x")
    with pytest.raises(IncidentNotFoundError):
        store.attach_thread(999, thread=ThreadRef("slack", "C", "1.2"))


def test_list_filters_and_order(
    store: IncidentStore, make_report: MakeReport, clock: FakeClock
) -> None:
    ids = []
    for n, layer in enumerate([Layer.DRIVER, Layer.QUOTA, Layer.DRIVER]):
        clock.advance(minutes=1)
        inc = store.record(
            make_report(layer, name=f"p{n}"), requested_by=None, duration_ms=1
        ).incident
        assert inc is not None
        ids.append(inc.id)
    store.set_status(ids[0], IncidentStatus.RESOLVED, by="x")

    assert [i.id for i in store.list()] == ids[::-1]
    assert [i.id for i in store.list(limit=2)] == ids[:0:-1]
    assert [i.id for i in store.list(layer=Layer.DRIVER)] == [ids[2], ids[0]]
    assert [i.id for i in store.list(status=IncidentStatus.OPEN, layer=Layer.DRIVER)] == [ids[2]]
    assert [i.id for i in store.list(status=IncidentStatus.RESOLVED)] == [ids[0]]
    assert store.list(status=IncidentStatus.ACKNOWLEDGED) == []


def test_stats(store: IncidentStore, make_report: MakeReport, clock: FakeClock) -> None:
    empty = store.stats()
    assert (empty.total, empty.open_now, empty.median_time_to_resolve_seconds) == (0, 0, None)
    assert empty.by_layer == dict.fromkeys(Layer, 0)

    # Three driver incidents resolved after 60 s, 180 s and 600 s; one quota after 30 s;
    # one scheduling incident still open, one acknowledged quota incident.
    for n, seconds in enumerate([60, 180, 600]):
        inc = store.record(
            make_report(Layer.DRIVER, name=f"d{n}"), requested_by=None, duration_ms=1
        ).incident
        assert inc is not None
        clock.advance(seconds=seconds)
        store.set_status(inc.id, IncidentStatus.RESOLVED, by="x")
    quick = store.record(make_report(Layer.QUOTA, name="q0"), requested_by=None, duration_ms=1)
    clock.advance(seconds=30)
    store.record(make_report(None, name="q0"), requested_by=None, duration_ms=1)  # auto-resolves
    assert quick.incident is not None
    store.record(make_report(Layer.SCHEDULING, name="s0"), requested_by=None, duration_ms=1)
    acked = store.record(make_report(Layer.QUOTA, name="q1"), requested_by=None, duration_ms=1)
    assert acked.incident is not None
    store.set_status(acked.incident.id, IncidentStatus.ACKNOWLEDGED, by="x")

    stats = store.stats()
    assert (stats.total, stats.open_now, stats.resolved) == (6, 2, 4)
    assert stats.by_layer == {
        Layer.DRIVER: 3,
        Layer.DEVICE_PLUGIN: 0,
        Layer.SCHEDULING: 1,
        Layer.QUOTA: 2,
    }
    assert stats.open_by_layer == {
        Layer.DRIVER: 0,
        Layer.DEVICE_PLUGIN: 0,
        Layer.SCHEDULING: 1,
        Layer.QUOTA: 1,
    }
    assert stats.median_time_to_resolve_seconds == pytest.approx(120.0)  # of 30, 60, 180, 600
    assert stats.median_time_to_resolve_seconds_by_layer == {
        Layer.DRIVER: pytest.approx(180.0),
        Layer.DEVICE_PLUGIN: None,
        Layer.SCHEDULING: None,
        Layer.QUOTA: pytest.approx(30.0),
    }
    assert store.open_counts() == stats.open_by_layer
