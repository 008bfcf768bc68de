"""Which database, and how to talk to it: URL resolution, engine options, error translation.

`DATABASE_URL` selects the database; without it a SQLite file in the data directory
(`$GPU_TRIAGE_DATA_DIR`, default the user's data folder: `$XDG_DATA_HOME/gpu-triage`, else
`~/.local/share/gpu-triage`, so every directory a user works in shares one history) is used. The commands and the bot resolve both in
their settings (`gpu_triage.settings`) and pass the URL; the fallbacks here serve a caller
that names no URL (a library user, a test). Every driver error that reaches a user is
turned into one `StoreUnavailableError` line that names the database without its password.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, exc, make_url
from sqlalchemy.engine import URL
from sqlalchemy.orm import Session, sessionmaker

from incidents.errors import Fault, StoreUnavailableError
from incidents.sqlite import file_gone, prepare_sqlite
from incidents.timeouts import Timeouts, timeouts_from_env, watch

SQLITE_FILE = "incidents.sqlite"


def default_data_dir() -> str:
    """The user's data folder for GPU Triage, as the XDG base directory spec places it."""
    xdg = os.environ.get("XDG_DATA_HOME", "").strip()
    base = Path(xdg) if xdg and Path(xdg).is_absolute() else Path.home() / ".local" / "share"
    return str(base / "gpu-triage")


_UNDEFINED_TABLE = "42P01"  # PostgreSQL SQLSTATE


def sqlite_url(data_dir: str) -> str:
    """The SQLite file of the data directory `data_dir`, as a URL."""
    return f"sqlite:///{(Path(data_dir) / SQLITE_FILE).resolve()}"


def default_url() -> str:
    return sqlite_url(os.environ.get("GPU_TRIAGE_DATA_DIR") or default_data_dir())


def resolve_url(url: str | None = None) -> str:
    """An explicit URL, else `DATABASE_URL`, else the default SQLite file."""
    return url or os.environ.get("DATABASE_URL") or default_url()


def display_name(url: str | URL) -> str:
    """The URL as shown to people: password masked, or the raw text if it does not parse."""
    try:
        parsed = make_url(url) if isinstance(url, str) else url
    except exc.ArgumentError:
        text = str(url)
        return text.split("@", 1)[-1] if "@" in text else text
    return parsed.render_as_string(hide_password=True)


def create_store_engine(url: str, *, timeouts: Timeouts | None = None) -> Engine:
    """An engine with the options the store relies on: lock and statement timeouts (default:
    `GPU_TRIAGE_DB_LOCK_TIMEOUT` / `GPU_TRIAGE_DB_STATEMENT_TIMEOUT`), connections cut when the
    server stays silent past them, liveness checks, SQLite's locking and file watch."""
    try:
        parsed = make_url(url)
    except exc.ArgumentError as e:
        raise StoreUnavailableError(
            f"incident database URL {display_name(url)!r} is invalid", fault=Fault.MISCONFIGURED
        ) from e
    timeouts = timeouts or timeouts_from_env()
    connect_args: dict[str, Any] = {}
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        _ensure_sqlite_dir(parsed)
        if "timeout" not in parsed.query:
            connect_args["timeout"] = timeouts.lock
    elif backend == "postgresql" and parsed.get_driver_name() == "psycopg":
        if "connect_timeout" not in parsed.query:
            connect_args["connect_timeout"] = max(1, round(timeouts.lock))
        # The URL's own `options` (e.g. a search_path) are kept; ours are added.
        given = parsed.query.get("options", "")
        given = " ".join(given) if isinstance(given, tuple) else given
        connect_args["options"] = f"{given} {timeouts.postgres_options()}".strip()
    try:
        engine = create_engine(parsed, connect_args=connect_args)
    except (exc.ArgumentError, exc.NoSuchModuleError, ImportError) as e:
        raise StoreUnavailableError(
            f"incident database {display_name(parsed)} cannot be used: {_first_line(e)}",
            fault=Fault.MISCONFIGURED,
        ) from e
    prepare_sqlite(engine, timeouts)
    watch(engine, seconds=timeouts.cut_after, ping=backend == "postgresql")
    return engine


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
            f"cannot create directory {parent}: {e.strerror or e}",
            fault=Fault.READ_ONLY if isinstance(e, PermissionError) else Fault.UNAVAILABLE,
        ) from e


def unavailable(error: BaseException, *, url: URL) -> StoreUnavailableError:
    """Translate a driver/pool error into the one-line error users see, with its fault."""
    name = display_name(url)
    fault = fault_of(error)
    if fault is Fault.NOT_INITIALISED:
        return StoreUnavailableError(
            f"incident database {name} is not initialised: run `gpu-triage db upgrade`",
            fault=fault,
        )
    gone = file_gone(url.database) if url.get_backend_name() == "sqlite" else None
    if gone is not None:
        return StoreUnavailableError(
            f"incident database file {gone} is gone (deleted or moved while in use): nothing "
            "is recorded until it is restored, or the bot restarts with a new one",
            fault=Fault.GONE,
        )
    what = "is read-only" if fault is Fault.READ_ONLY else "is unavailable"
    return StoreUnavailableError(
        f"incident database {name} {what}: {_first_line(error)}", fault=fault
    )


# PostgreSQL SQLSTATEs: read_only_sql_transaction, insufficient_privilege, lock_not_available,
# query_canceled (statement_timeout), undefined_table.
_SQLSTATE = {
    "25006": Fault.READ_ONLY,
    "42501": Fault.READ_ONLY,
    "55P03": Fault.LOCKED,
    "57014": Fault.TIMEOUT,
    _UNDEFINED_TABLE: Fault.NOT_INITIALISED,
}
_SQLITE = [  # (what the message says, the fault): SQLite's errors carry no code in Python 3.11
    ("no such table", Fault.NOT_INITIALISED),
    ("readonly database", Fault.READ_ONLY),
    ("database is locked", Fault.LOCKED),
    ("interrupted", Fault.TIMEOUT),
    ("unable to open", Fault.UNREACHABLE),
]


def fault_of(error: BaseException) -> Fault:
    """What kind of fault a driver or pool error is."""
    if isinstance(error, exc.TimeoutError):  # no pooled connection came free in time
        return Fault.TIMEOUT
    orig = getattr(error, "orig", None)
    state = getattr(orig, "sqlstate", None)
    if state in _SQLSTATE:
        return _SQLSTATE[state]
    text = str(orig if orig is not None else error).lower()
    for words, fault in _SQLITE:
        if words in text:
            return fault
    if "timeout expired" in text or "closed the connection" in text or "consuming input" in text:
        return Fault.TIMEOUT  # the server stayed silent (or the watchdog cut it)
    if isinstance(error, exc.OperationalError) and state is None:
        return Fault.UNREACHABLE
    return Fault.UNAVAILABLE


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
