"""Two bot replicas recording the same blocked workload at once open exactly one incident."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from incidents import IncidentStatus, IncidentStore, RecordResult
from incidents.timeouts import Timeouts
from tests.incidents.incident_helpers import make_report
from triage.model import Layer, TriageReport

WRITERS = 8

# The writers race on purpose: on a loaded machine they may queue past the bot's 3 s lock
# timeout, which would fail the test for the load, not for what it checks.
RACE = Timeouts(lock=30.0, statement=30.0)


def _race(stores: list[IncidentStore], reports: list[TriageReport]) -> list[RecordResult]:
    """Each store records its report at the same moment (all threads released together)."""
    barrier = threading.Barrier(len(stores))

    def write(args: tuple[IncidentStore, TriageReport]) -> RecordResult:
        store, report = args
        barrier.wait()
        return store.record(report, requested_by="bot", duration_ms=1)

    with ThreadPoolExecutor(len(stores)) as pool:
        return list(pool.map(write, zip(stores, reports, strict=True)))


def test_concurrent_records_share_one_incident(db_url: str) -> None:
    # Separate stores (separate engines and pools) behave like separate replicas.
    stores = [IncidentStore.from_url(db_url, timeouts=RACE) for _ in range(WRITERS)]
    stores[0].upgrade()
    rounds = 3
    try:
        for n in range(rounds):
            results = _race(stores, [make_report(Layer.DRIVER, name=f"race-{n}")] * WRITERS)
            assert sum(r.created for r in results) == 1
            ids = {r.incident.id for r in results if r.incident is not None}
            assert len(ids) == 1
            [incident_id] = ids
            assert len(stores[0].runs(incident_id)) == WRITERS
            got = stores[0].get(incident_id)
            assert got is not None and got.run_count == WRITERS
        assert len(stores[0].list(status=IncidentStatus.OPEN)) == rounds
    finally:
        for s in stores:
            s.close()


def test_concurrent_different_causes_leave_one_open(db_url: str) -> None:
    stores = [IncidentStore.from_url(db_url, timeouts=RACE) for _ in range(4)]
    stores[0].upgrade()
    layers = [Layer.DRIVER, Layer.QUOTA, Layer.SCHEDULING, Layer.DEVICE_PLUGIN]
    try:
        results = _race(stores, [make_report(layer, codes=(layer.value,)) for layer in layers])
        assert all(r.created for r in results)
        assert len(stores[0].list(status=IncidentStatus.OPEN)) == 1
        assert len(stores[0].list()) == 4
    finally:
        for s in stores:
            s.close()
