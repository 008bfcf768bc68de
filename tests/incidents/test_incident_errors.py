"""A database that cannot be used becomes one StoreUnavailableError line, password hidden."""

from __future__ import annotations

import socket
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from incidents import IncidentStore, StoreUnavailableError
from tests.incidents.incident_helpers import MakeReport


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port  # nothing listens there once the socket is closed


def _one_line(e: pytest.ExceptionInfo[StoreUnavailableError]) -> str:
    text = str(e.value)
    assert "\n" not in text
    return text


@pytest.fixture
def closed_store() -> Iterator[IncidentStore]:
    url = f"postgresql+psycopg://triage:hunter2@127.0.0.1:{_closed_port()}/incidents"
    with IncidentStore.from_url(url) as store:
        yield store


def test_postgres_down_on_every_operation(
    closed_store: IncidentStore, make_report: MakeReport
) -> None:
    calls: list[Callable[[], object]] = [
        lambda: closed_store.record(make_report(), requested_by="U1", duration_ms=1),
        lambda: closed_store.list(),
        lambda: closed_store.get(1),
        lambda: closed_store.stats(),
        lambda: closed_store.open_counts(),
        closed_store.upgrade,
    ]
    for call in calls:
        with pytest.raises(StoreUnavailableError) as e:
            call()
        text = _one_line(e)
        assert "hunter2" not in text
        assert text.startswith("incident database postgresql+psycopg://triage:***@127.0.0.1:")
        assert "is unavailable" in text


def test_read_only_sqlite(tmp_path: Path, make_report: MakeReport) -> None:
    path = tmp_path / "ro.sqlite"
    with IncidentStore.from_url(f"sqlite:///{path}") as writable:
        writable.upgrade()
    # Opened read-only through SQLite's URI syntax (chmod does not stop root, this does).
    with IncidentStore.from_url(f"sqlite:///file:{path}?mode=ro&uri=true") as store:
        assert store.list() == []  # reading still works
        with pytest.raises(StoreUnavailableError) as e:
            store.record(make_report(), requested_by="U1", duration_ms=1)
    assert "readonly database" in _one_line(e)


def test_sqlite_directory_cannot_be_created(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("")
    with pytest.raises(StoreUnavailableError, match="cannot create directory") as e:
        IncidentStore.from_url(f"sqlite:///{blocker}/incidents.sqlite")
    _one_line(e)


def test_locked_sqlite(tmp_path: Path, make_report: MakeReport) -> None:
    path = tmp_path / "locked.sqlite"
    with IncidentStore.from_url(f"sqlite:///{path}") as setup:
        setup.upgrade()
    holder = sqlite3.connect(path, isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        with (
            IncidentStore.from_url(f"sqlite:///{path}?timeout=0.2") as store,
            pytest.raises(StoreUnavailableError, match="database is locked") as e,
        ):
            store.record(make_report(), requested_by="U1", duration_ms=1)
        _one_line(e)
    finally:
        holder.execute("ROLLBACK")
        holder.close()


def test_not_migrated(sqlite_url: str) -> None:
    with (
        IncidentStore.from_url(sqlite_url) as store,
        pytest.raises(StoreUnavailableError, match=r"not initialised: run `gpu-triage db upgrade`"),
    ):
        store.list()


@pytest.mark.postgres
def test_not_migrated_postgres(pg_url: str) -> None:
    with (
        IncidentStore.from_url(pg_url) as store,
        pytest.raises(StoreUnavailableError, match="not initialised"),
    ):
        store.stats()


@pytest.mark.parametrize(
    "url", ["nonsense", "nosuchdialect://x/y", "postgresql+nosuchdriver://u:pw@127.0.0.1/db"]
)
def test_bad_url(url: str) -> None:
    with pytest.raises(StoreUnavailableError) as e:
        IncidentStore.from_url(url)
    assert "pw" not in _one_line(e)


def test_url_resolution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("GPU_TRIAGE_DATA_DIR", str(tmp_path / "data" / "nested"))
    with IncidentStore.from_url() as store:
        assert store.engine.url.database == str(tmp_path / "data" / "nested" / "incidents.sqlite")
        assert (tmp_path / "data" / "nested").is_dir()
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'env.sqlite'}")
    with IncidentStore.from_url() as store:
        assert store.engine.url.database == str(tmp_path / "env.sqlite")
    with IncidentStore.from_url(f"sqlite:///{tmp_path / 'arg.sqlite'}") as store:
        assert store.engine.url.database == str(tmp_path / "arg.sqlite")
