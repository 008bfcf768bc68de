"""How long the incident store waits for its database, and what ends a wait that would not.

Lock waits and statements are bounded by the database where it can: SQLite's busy timeout
(the `timeout` connect argument), PostgreSQL's `lock_timeout` and `statement_timeout` (session
options sent at connect, with `idle_in_transaction_session_timeout` so that a frozen client
cannot hold locks for ever). A server that does not answer at all, frozen or behind a proxy
that stopped forwarding, enforces neither, and psycopg has no client-side query timeout: its
call would wait out the whole freeze, holding a worker (or, before the ack was made not to
wait, Slack's request). So each connection checked out of the pool is watched: held past the
timeouts plus a grace period, its socket is shut down (SQLite: its statement is interrupted),
the blocked call fails at once and the pool discards the connection. The pool's liveness ping
runs under the same watch (SQLAlchemy's own `pool_pre_ping` would run before it, unwatched).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, Engine, event, exc

from incidents.errors import Fault, StoreUnavailableError

log = logging.getLogger(__name__)

LOCK_ENV = "GPU_TRIAGE_DB_LOCK_TIMEOUT"
STATEMENT_ENV = "GPU_TRIAGE_DB_STATEMENT_TIMEOUT"
_IDLE_IN_TRANSACTION_MS = 60_000


@dataclass(frozen=True)
class Timeouts:
    """Seconds: waiting for another writer's lock, one statement, and the margin after which
    a connection that is still silent is cut."""

    lock: float = 3.0
    statement: float = 5.0
    grace: float = 2.0

    @property
    def cut_after(self) -> float:
        return max(self.lock, self.statement) + self.grace

    def postgres_options(self) -> str:
        """`-c` options for PostgreSQL's `options` connection parameter."""
        return (
            f"-c statement_timeout={round(self.statement * 1000)} "
            f"-c lock_timeout={round(self.lock * 1000)} "
            f"-c idle_in_transaction_session_timeout={_IDLE_IN_TRANSACTION_MS}"
        )


def timeouts_from_env(env: Mapping[str, str] | None = None) -> Timeouts:
    """`GPU_TRIAGE_DB_LOCK_TIMEOUT` / `GPU_TRIAGE_DB_STATEMENT_TIMEOUT` (seconds) over the
    defaults; a malformed value is one line naming the variable."""
    env = os.environ if env is None else env
    values: dict[str, float] = {}
    for field, name in (("lock", LOCK_ENV), ("statement", STATEMENT_ENV)):
        text = (env.get(name) or "").strip()
        if not text:
            continue
        try:
            value = float(text)
        except ValueError:
            value = -1.0
        if not 0 < value <= 3600:
            raise StoreUnavailableError(
                f"{name} is malformed: must be a number of seconds between 0 and 3600, not {text!r}",
                fault=Fault.MISCONFIGURED,
            )
        values[field] = value
    return Timeouts(**values)


class Watchdog:
    """Deadlines on connections, one thread for the process (started on demand, gone when
    nothing has been watched for a while)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._armed: dict[int, tuple[float, Callable[[], None]]] = {}
        self._running = False

    def arm(self, key: int, *, seconds: float, cut: Callable[[], None]) -> None:
        with self._cond:
            self._armed[key] = (time.monotonic() + seconds, cut)
            if not self._running:
                self._running = True
                threading.Thread(target=self._run, name="gpu-triage-db-watch", daemon=True).start()
            self._cond.notify()

    def disarm(self, key: int) -> None:
        with self._cond:
            self._armed.pop(key, None)

    def _run(self) -> None:
        while True:
            with self._cond:
                now = time.monotonic()
                due = [(k, cut) for k, (at, cut) in self._armed.items() if at <= now]
                for key, _ in due:
                    del self._armed[key]
                if not due:
                    if not self._armed and not self._cond.wait(30) and not self._armed:
                        self._running = False
                        return
                    if self._armed:
                        self._cond.wait(min(at for at, _ in self._armed.values()) - now)
                    continue
            for _, cut in due:
                try:
                    cut()
                except Exception as e:  # the connection may be closing on its own already
                    log.debug("could not cut a database connection: %s", e)


WATCHDOG = Watchdog()


def watch(engine: Engine, *, seconds: float, ping: bool) -> None:
    """Cut any connection of `engine` held past `seconds`; `ping` (PostgreSQL) checks that a
    pooled connection is alive when it is checked out again, under the same deadline."""
    if getattr(engine.pool, "_gpu_triage_watched", False):
        return
    engine.pool._gpu_triage_watched = True  # type: ignore[attr-defined]

    def checkout(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        WATCHDOG.arm(id(dbapi_connection), seconds=seconds, cut=_cutter(dbapi_connection))
        if ping and record.info.get(_USED) is dbapi_connection:
            try:
                cursor = dbapi_connection.cursor()
                try:
                    cursor.execute("SELECT 1")
                finally:
                    cursor.close()
            except Exception as e:
                WATCHDOG.disarm(id(dbapi_connection))
                raise exc.DisconnectionError(f"the pooled connection is dead: {e}") from e
        record.info[_USED] = dbapi_connection

    def checkin(dbapi_connection: Any, record: Any, *exception: Any) -> None:
        if dbapi_connection is not None:
            WATCHDOG.disarm(id(dbapi_connection))

    event.listen(engine, "checkout", checkout)
    event.listen(engine, "checkin", checkin)
    event.listen(engine, "invalidate", checkin)


_USED = "gpu_triage_checked_out_before"


def exempt(connection: Connection) -> None:
    """No deadline for this checkout (migrations: DDL on a large table may take minutes)."""
    WATCHDOG.disarm(id(connection.connection.dbapi_connection))


def _cutter(dbapi_connection: Any) -> Callable[[], None]:
    """How to end a call blocked on this connection: interrupt SQLite, shut psycopg's socket."""

    def cut() -> None:
        interrupt = getattr(dbapi_connection, "interrupt", None)
        if interrupt is not None:  # sqlite3
            interrupt()
            log.warning("an incident database statement ran past its deadline: interrupted")
            return
        pgconn = getattr(dbapi_connection, "pgconn", None)
        fd = getattr(pgconn, "socket", -1) if pgconn is not None else -1
        if fd < 0:
            return
        # A duplicate of the descriptor: shutting down the socket ends the wait in psycopg's
        # own thread, and closing our duplicate leaves its descriptor alone.
        with socket.socket(fileno=os.dup(fd)) as s:
            s.shutdown(socket.SHUT_RDWR)
        log.warning("the incident database did not answer within its deadline: connection cut")

    return cut
