"""SQLite as the incident store: one file, shared by one process's threads and by the CLI.

- Writers take the write lock at BEGIN (`BEGIN IMMEDIATE`): pysqlite otherwise begins lazily
  and upgrades a read lock to a write lock mid-transaction, which makes two concurrent writers
  fail with "database is locked" instead of waiting.
- Writers of one process also queue on a lock of their own first (SQLite's busy handler waits
  in sleeps of up to 100 ms, which under a burst of Slack deliveries turned 20 concurrent acks
  into a second), for at most the lock timeout: another process holding the database used to
  queue every writer of ours behind the first, each for its whole busy timeout.
- The file is watched. Deleted or replaced under a running bot, its pooled connections kept
  writing to the deleted file, and a new connection would have created an empty one in its
  place ("no such table" on every write). A connection is dropped at its next checkout when
  the file is no longer the one it opened, and once the store has seen its file, new
  connections open only an existing file: the error then says the file is gone.
- A read-only file is read as usual. A WAL database in a read-only directory cannot be (SQLite
  must create the `-shm` file beside it), so it is opened read-only and immutable instead.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from typing import Any
from urllib.parse import quote

from sqlalchemy import Engine, event, exc

from incidents.timeouts import Timeouts

log = logging.getLogger(__name__)

WRITE_OPTION = "gpu_triage_write"
_WRITERS: dict[str, threading.Lock] = {}  # per database file: this process's writers queue
_WRITERS_LOCK = threading.Lock()
_HOLDS = "gpu_triage_holds_write_lock"
_FILE = "gpu_triage_file"


def prepare_sqlite(engine: Engine, timeouts: Timeouts | None = None) -> None:
    """Install the behaviour above on a SQLite engine (once; other engines are left alone)."""
    if engine.dialect.name != "sqlite" or getattr(engine.pool, "_gpu_triage_sqlite", False):
        return
    engine.pool._gpu_triage_sqlite = True  # type: ignore[attr-defined]
    lock_timeout = (timeouts or Timeouts()).lock
    path = _file_path(engine.url.database)
    seen = threading.Event()  # the store has opened its file once: never create it again

    def do_connect(dialect: Any, record: Any, cargs: list[Any], cparams: dict[str, Any]) -> Any:
        if path is None:
            return None
        if seen.is_set():
            cargs[:1], cparams["uri"] = [f"file:{quote(path)}?mode=rw"], True
        connection = dialect.connect(*cargs, **cparams)
        try:
            connection.execute("SELECT count(*) FROM sqlite_master").fetchone()
        except sqlite3.OperationalError as e:
            if "unable to open" not in str(e) or not os.path.exists(path):
                connection.close()
                raise
            connection.close()  # a WAL file in a directory we may not write: read it as is
            log.warning(
                "incident database %s opened read-only: its directory is not writable", path
            )
            cargs[:1], cparams["uri"] = [f"file:{quote(path)}?mode=ro&immutable=1"], True
            connection = dialect.connect(*cargs, **cparams)
        seen.set()
        return connection

    def connect(dbapi_connection: Any, record: Any) -> None:
        _pragmas(dbapi_connection)
        if path is not None:
            record.info[_FILE] = _identity(path)

    def checkout(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        if path is not None and _identity(path) != record.info.get(_FILE):
            raise exc.DisconnectionError(f"incident database file {path} was deleted or replaced")

    def begin(conn: Any) -> None:
        # Writers (marked with WRITE_OPTION) queue on the lock; readers stay plain deferred BEGIN.
        write = bool(conn.get_execution_options().get(WRITE_OPTION))
        if write:
            with _WRITERS_LOCK:
                lock = _WRITERS.setdefault(str(conn.engine.url.database), threading.Lock())
            if not lock.acquire(timeout=lock_timeout):
                raise exc.OperationalError(
                    "BEGIN IMMEDIATE",
                    None,
                    sqlite3.OperationalError("database is locked (by this process's writers)"),
                )
            conn.info[_HOLDS] = lock
        try:
            conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")
        except BaseException:
            end(conn)
            raise

    def end(conn: Any) -> None:
        lock = conn.info.pop(_HOLDS, None)
        if lock is not None:
            lock.release()

    event.listen(engine, "do_connect", do_connect)
    event.listen(engine, "connect", connect)
    event.listen(engine, "checkout", checkout)
    event.listen(engine, "begin", begin)
    event.listen(engine, "commit", end)
    event.listen(engine, "rollback", end)


def _pragmas(dbapi_connection: Any) -> None:
    dbapi_connection.isolation_level = None  # we emit BEGIN ourselves
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA foreign_keys=ON")
        # Write-ahead log: readers never wait for the writer, and a commit appends to the log
        # instead of syncing the database file (NORMAL is durable across crashes of the process;
        # a power loss may lose the last commits). The bot writes on every Slack delivery.
        # A read-only database keeps the journal mode it has.
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
        except sqlite3.OperationalError as e:
            log.debug("journal mode left as it is: %s", e)
        cursor.execute("PRAGMA synchronous=NORMAL")
    finally:
        cursor.close()


def _file_path(database: str | None) -> str | None:
    """The database file's absolute path; None for memory and URI databases."""
    if not database or database == ":memory:" or database.startswith("file:"):
        return None
    return os.path.abspath(os.path.expanduser(database))


def _identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def file_gone(database: str | None) -> str | None:
    """The database's path when it is a file that no longer exists, else None."""
    path = _file_path(database)
    return path if path is not None and not os.path.exists(path) else None
