"""The incident store under database faults: every wait is bounded, every failure is one
`StoreUnavailableError` that says what kind of fault it was, and nothing fails silently."""

from __future__ import annotations

import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest
from sqlalchemy import text

from incidents import IncidentStore, StoreUnavailableError
from incidents.database import create_store_engine
from incidents.errors import Fault
from incidents.timeouts import Timeouts, timeouts_from_env
from tests.db_faults import FrozenProxy, read_only, sqlite_locked
from tests.incidents.incident_helpers import MakeReport

FAST = Timeouts(lock=0.5, statement=1.0, grace=0.5)


def _store(url: str, timeouts: Timeouts = FAST) -> IncidentStore:
    store = IncidentStore(create_store_engine(url, timeouts=timeouts))
    store.upgrade()
    return store


def test_a_sqlite_file_locked_by_another_process_fails_within_the_lock_timeout(
    sqlite_url: str, tmp_path: Path, make_report: MakeReport
) -> None:
    store = _store(sqlite_url)
    with sqlite_locked(tmp_path / "incidents.sqlite"):
        started = time.monotonic()
        with pytest.raises(StoreUnavailableError) as e:
            store.record(make_report(), requested_by="U1", duration_ms=1.0)
        assert e.value.fault is Fault.LOCKED
        assert time.monotonic() - started < 3  # lock timeout 0.5 s, not the old 15 s
        assert store.list() == []  # readers are not held up by the writer (WAL)
    assert store.record(make_report(), requested_by="U1", duration_ms=1.0).created


def test_a_deleted_sqlite_file_is_noticed_and_never_silently_recreated(
    sqlite_url: str, tmp_path: Path, make_report: MakeReport
) -> None:
    store = _store(sqlite_url)
    store.record(make_report(), requested_by="U1", duration_ms=1.0)
    path = tmp_path / "incidents.sqlite"
    for p in tmp_path.glob("incidents.sqlite*"):
        p.unlink()
    with pytest.raises(StoreUnavailableError) as e:
        store.record(make_report(), requested_by="U1", duration_ms=1.0)
    assert e.value.fault is Fault.GONE and str(path) in str(e.value)
    assert not path.exists()
    assert store.condition() == f"incident database file {path} is gone: nothing is recorded"


@pytest.mark.parametrize("what", ["file", "directory"])
def test_a_read_only_sqlite_database_is_read_and_says_it_takes_no_writes(
    sqlite_url: str, tmp_path: Path, make_report: MakeReport, what: str
) -> None:
    seed = _store(sqlite_url)
    seed.record(make_report(), requested_by="U1", duration_ms=1.0)
    seed.close()
    path = tmp_path / "incidents.sqlite"
    with read_only(path if what == "file" else tmp_path):
        store = IncidentStore(create_store_engine(sqlite_url, timeouts=FAST))
        try:
            assert [i.name for i in store.list()] == ["train-0"]
            refused = store.check_writable()
            assert refused is not None and refused.fault is Fault.READ_ONLY
            assert store.condition() is not None and "read-only" in store.condition()  # type: ignore[operator]
            with pytest.raises(StoreUnavailableError) as e:
                store.record(make_report(), requested_by="U1", duration_ms=1.0)
            assert e.value.fault is Fault.READ_ONLY
        finally:
            store.close()


def test_ids_beyond_64_bits_name_no_incident(store: IncidentStore) -> None:
    assert store.get(10**23) is None and store.get(0) is None and store.runs(10**23) == []


def test_a_reply_claim_records_a_delivery_that_never_was(store: IncidentStore) -> None:
    assert store.deliveries.claim_reply("trigger:lost", owner="a") is True
    assert store.deliveries.claim_reply("trigger:lost", owner="b") is False
    assert store.deliveries.first_time("trigger:lost") is False  # a retry is dropped now


def test_stats_can_be_scoped_to_what_a_tenant_sees(
    store: IncidentStore, make_report: MakeReport
) -> None:
    store.record(make_report(namespace="team-a"), requested_by="U1", duration_ms=1.0)
    store.record(make_report(namespace="team-b"), requested_by="U1", duration_ms=1.0)
    assert store.stats().total == 2
    assert store.stats(where=lambda cluster, ns: ns == "team-a").total == 1


def test_malformed_timeouts_name_their_variable() -> None:
    with pytest.raises(StoreUnavailableError, match="GPU_TRIAGE_DB_LOCK_TIMEOUT is malformed"):
        timeouts_from_env({"GPU_TRIAGE_DB_LOCK_TIMEOUT": "soon"})
    assert timeouts_from_env({"GPU_TRIAGE_DB_STATEMENT_TIMEOUT": "2.5"}).statement == 2.5


@pytest.mark.postgres
def test_postgres_statements_and_lock_waits_are_bounded_by_the_server(pg_url: str) -> None:
    store = _store(pg_url)
    try:
        with store.engine.connect() as conn:
            with pytest.raises(Exception, match="statement timeout"):
                conn.execute(text("SELECT pg_sleep(5)"))
            conn.rollback()
            assert conn.execute(text("SHOW lock_timeout")).scalar() == "500ms"
    finally:
        store.close()


@pytest.mark.postgres
def test_a_frozen_postgres_path_is_cut_at_the_deadline(
    pg_url: str, make_report: MakeReport
) -> None:
    """The server is up but nothing comes back (a stopped proxy): neither statement_timeout
    nor lock_timeout can fire, so the store's own deadline cuts the connection."""
    url = urlsplit(pg_url)
    proxy = FrozenProxy(url.hostname or "127.0.0.1", url.port or 5432)
    via = urlunsplit(url._replace(netloc=f"{url.username}@127.0.0.1:{proxy.port}"))
    store = _store(via)
    try:
        store.record(make_report(), requested_by="U1", duration_ms=1.0)
        proxy.freeze()
        started = time.monotonic()
        with pytest.raises(StoreUnavailableError) as e:
            store.list()
        took = time.monotonic() - started
        assert e.value.fault in (Fault.TIMEOUT, Fault.UNREACHABLE)
        assert took < FAST.cut_after + 3  # about 1.5 s: not the length of the freeze
        proxy.thaw()
        assert [i.name for i in store.list()] == ["train-0"]  # a new connection, once it works
    finally:
        proxy.close()
        store.close()
