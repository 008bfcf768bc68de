"""Which database, and how to talk to it: URL resolution, engine options, error translation.

`DATABASE_URL` selects the database; without it a SQLite file in the data directory
(`$GPU_TRIAGE_DATA_DIR`, default `./data`) is used. Every driver error that reaches a user is
turned into one `StoreUnavailableError` line that names the database without its password.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event, exc, make_url
from sqlalchemy.engine import URL
from sqlalchemy.orm import Session, sessionmaker

from incidents.errors import StoreUnavailableError

DEFAULT_DATA_DIR = "data"
SQLITE_FILE = "incidents.sqlite"
_UNDEFINED_TABLE = "42P01"  # PostgreSQL SQLSTATE


def default_url() -> str:
    data_dir = Path(os.environ.get("GPU_TRIAGE_DATA_DIR") or DEFAULT_DATA_DIR)
    return f"sqlite:///{(data_dir / SQLITE_FILE).resolve()}"


def resolve_url(url: str | None = None) -> str:
    """An explicit URL, else `DATABASE_URL`, else the default SQLite file."""
    return url or os.environ.get("DATABASE_URL") or default_url()


def auto_migrate_from_env() -> bool:
    """`GPU_TRIAGE_AUTO_MIGRATE=1` (or true/yes/on): upgrade the schema when a process starts."""
    value = os.environ.get("GPU_TRIAGE_AUTO_MIGRATE", "").strip().lower()
    return value in {"1", "true", "yes", "on"}


def display_name(url: str | URL) -> str:
    """The URL as shown to people: password masked, or the raw text if it does not parse."""
    try:
        parsed = make_url(url) if isinstance(url, str) else url
    except exc.ArgumentError:
        text = str(url)
        return text.split("@", 1)[-1] if "@" in text else text
    return parsed.render_as_string(hide_password=True)


def create_store_engine(url: str) -> Engine:
    """An engine with the options the store relies on (timeouts, pre-ping, SQLite locking)."""
    try:
        parsed = make_url(url)
    except exc.ArgumentError as e:
        raise StoreUnavailableError(
            f"incident database URL {display_name(url)!r} is invalid"
        ) from e
    connect_args: dict[str, Any] = {}
    options: dict[str, Any] = {}
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        _ensure_sqlite_dir(parsed)
        if "timeout" not in parsed.query:
            connect_args["timeout"] = 15
    elif backend == "postgresql":
        options["pool_pre_ping"] = True
        if parsed.get_driver_name() == "psycopg" and "connect_timeout" not in parsed.query:
            connect_args["connect_timeout"] = 5
    try:
        return create_engine(parsed, connect_args=connect_args, **options)
    except (exc.ArgumentError, exc.NoSuchModuleError, ImportError) as e:
        raise StoreUnavailableError(
            f"incident database {display_name(parsed)} cannot be used: {_first_line(e)}"
        ) from e


def _ensure_sqlite_dir(url: URL) -> None:
    db = url.database
    if not db or db == ":memory:" or db.startswith("file:"):
        return
    parent = Path(db).expanduser().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise StoreUnavailableError(
            f"incident database {display_name(url)} is unavailable: "
            f"cannot create directory {parent}: {e.strerror or e}"
        ) from e


def prepare_sqlite(engine: Engine) -> None:
    """SQLite: enforce foreign keys; writers take the write lock at BEGIN (`BEGIN IMMEDIATE`).

    pysqlite otherwise begins lazily and upgrades a read lock to a write lock mid-transaction,
    which makes two concurrent writers fail with "database is locked" instead of waiting.
    Writers of one process also queue on a lock of their own first: SQLite's busy handler
    waits in sleeps of up to 100 ms, which under a burst of Slack deliveries (each one a write)
    turned 20 concurrent acks into a second.
    """
    if engine.dialect.name != "sqlite" or event.contains(engine, "connect", _sqlite_connect):
        return
    event.listen(engine, "connect", _sqlite_connect)
    event.listen(engine, "begin", _sqlite_begin)
    event.listen(engine, "commit", _sqlite_end)
    event.listen(engine, "rollback", _sqlite_end)


def _sqlite_connect(dbapi_connection: Any, connection_record: Any) -> None:
    dbapi_connection.isolation_level = None  # we emit BEGIN ourselves
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA foreign_keys=ON")
        # Write-ahead log: readers never wait for the writer, and a commit appends to the log
        # instead of syncing the database file (NORMAL is durable across crashes of the process;
        # a power loss may lose the last commits). The bot writes on every Slack delivery.
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=NORMAL")
    finally:
        cursor.close()


WRITE_OPTION = "gpu_triage_write"


_WRITERS: dict[str, threading.Lock] = {}  # per database file: this process's writers queue
_WRITERS_LOCK = threading.Lock()
_HOLDS = "gpu_triage_holds_write_lock"


def _sqlite_begin(conn: Any) -> None:
    # Writers (marked with WRITE_OPTION) queue on the lock; readers stay plain deferred BEGIN.
    write = bool(conn.get_execution_options().get(WRITE_OPTION))
    if write:
        with _WRITERS_LOCK:
            lock = _WRITERS.setdefault(str(conn.engine.url.database), threading.Lock())
        lock.acquire()
        conn.info[_HOLDS] = lock
    try:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")
    except BaseException:
        _sqlite_end(conn)
        raise


def _sqlite_end(conn: Any) -> None:
    lock = conn.info.pop(_HOLDS, None)
    if lock is not None:
        lock.release()


def unavailable(error: BaseException, *, url: URL) -> StoreUnavailableError:
    """Translate a driver/pool error into the one-line error users see."""
    name = display_name(url)
    orig = getattr(error, "orig", None)
    if getattr(orig, "sqlstate", None) == _UNDEFINED_TABLE or "no such table" in str(orig):
        return StoreUnavailableError(
            f"incident database {name} is not initialised: run `gpu-triage db upgrade`"
        )
    return StoreUnavailableError(f"incident database {name} is unavailable: {_first_line(error)}")


def _first_line(error: BaseException) -> str:
    orig = getattr(error, "orig", None)
    text = str(orig if orig is not None else error).strip()
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), type(error).__name__)
    return line if len(line) <= 200 else line[:197] + "..."


class Book:
    """A part of the store over its sessions (`IncidentStore.groups`, `.replicas`): reads,
    writes, the guard that turns driver errors into `StoreUnavailableError`, and the clock."""

    def __init__(
        self,
        *,
        read: sessionmaker[Session],
        write: sessionmaker[Session],
        guard: Callable[[], AbstractContextManager[None]],
        clock: Callable[[], datetime],
    ) -> None:
        self._read, self._write, self._guard, self._clock = read, write, guard, clock
