"""The repository: the only place that reads or writes incidents. No SQL lives anywhere else.

`record()` turns each triage into durable history by the rules in `incidents.rules`.
A partial unique index allows one unresolved incident per workload; a concurrent writer that
loses the race gets an IntegrityError and retries, finding the winner's incident.
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

from sqlalchemy import Connection, Engine, delete, exc, false, func, select
from sqlalchemy.orm import Session, sessionmaker

from incidents import migrate
from incidents.database import (
    create_store_engine,
    display_name,
    resolve_url,
    unavailable,
)
from incidents.deliveries import DeliveryLog
from incidents.errors import (
    Fault,
    IncidentNotFoundError,
    InvalidTransitionError,
    StoreUnavailableError,
)
from incidents.groups import GroupBook
from incidents.models import IncidentRow, ReplicaRow, TriageRunRow
from incidents.replicas import ReplicaBook
from incidents.rules import incident_of, record_run, resolve
from incidents.sqlite import WRITE_OPTION, file_gone, prepare_sqlite
from incidents.summary import per_layer, summarise
from incidents.timeouts import Timeouts, exempt
from incidents.values import (
    Incident,
    IncidentStatus,
    RecordResult,
    Resolution,
    Stats,
    ThreadRef,
    TriageRun,
)
from triage.model import Layer, TriageReport

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]
MAX_ID = 2**63 - 1  # ids are 64-bit integers: a larger one names no incident (and overflows)
_RECORD_ATTEMPTS = 5
_ALLOWED = {
    IncidentStatus.OPEN: {IncidentStatus.ACKNOWLEDGED, IncidentStatus.RESOLVED},
    IncidentStatus.ACKNOWLEDGED: {IncidentStatus.RESOLVED},
    IncidentStatus.RESOLVED: set(),
}


def utcnow() -> datetime:
    return datetime.now(UTC)


class IncidentStore:
    """Incidents and triage runs in one SQL database (SQLite or PostgreSQL)."""

    def __init__(self, engine: Engine, *, clock: Clock = utcnow) -> None:
        prepare_sqlite(engine)
        self._engine = engine
        self._clock = clock
        self._read = sessionmaker(engine, expire_on_commit=False)
        self._write = sessionmaker(
            engine.execution_options(**{WRITE_OPTION: True}), expire_on_commit=False
        )
        self._deliveries = DeliveryLog(write=self._write, guard=self._guard, clock=self._clock)
        # Set by `check_writable()`: the database takes no writes (a read-only file, directory,
        # replica or grant). Reads still work; the bot then runs degraded and says so.
        self.read_only: StoreUnavailableError | None = None

    @classmethod
    def from_url(cls, url: str | None = None, *, timeouts: Timeouts | None = None) -> IncidentStore:
        """None → `DATABASE_URL` → SQLite at `$GPU_TRIAGE_DATA_DIR/incidents.sqlite`."""
        return cls(create_store_engine(resolve_url(url), timeouts=timeouts))

    @classmethod
    def open(
        cls, url: str | None = None, *, auto_migrate: bool = False, timeouts: Timeouts | None = None
    ) -> IncidentStore:
        """`from_url`, then `upgrade()` when asked to (`GPU_TRIAGE_AUTO_MIGRATE` is read by
        the settings of the command that opens the store)."""
        store = cls.from_url(url, timeouts=timeouts)
        if auto_migrate:
            try:
                store.upgrade()
            except BaseException:
                store.close()
                raise
        return store

    def close(self) -> None:
        """Close pooled connections (the store stays usable; new ones open on demand)."""
        self._engine.dispose()

    def __enter__(self) -> IncidentStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    @property
    def deliveries(self) -> DeliveryLog:
        """Slack deliveries seen: a retry is answered once, across restarts and replicas."""
        return self._deliveries

    @property
    def replicas(self) -> ReplicaBook:
        """The bot replicas running against this database, and the clusters each serves."""
        return ReplicaBook(read=self._read, write=self._write, guard=self._guard, clock=self._clock)

    @property
    def groups(self) -> GroupBook:
        """The incident groups (the fleet view's causes and their alerts)."""
        return GroupBook(read=self._read, write=self._write, guard=self._guard, clock=self._clock)

    @property
    def engine(self) -> Engine:
        return self._engine

    @property
    def display_url(self) -> str:
        return self._engine.url.render_as_string(hide_password=True)

    @contextmanager
    def _guard(self) -> Iterator[None]:
        try:
            yield
        except (exc.DBAPIError, exc.TimeoutError) as e:
            raise unavailable(e, url=self._engine.url) from e

    def check_writable(self) -> StoreUnavailableError | None:
        """Probe whether the database takes writes (a write that changes nothing): None when
        it does, else the read-only error, also kept in `read_only`. Other faults raise."""
        try:
            with self._guard(), self._write.begin() as session:
                session.execute(delete(ReplicaRow).where(false()))
        except StoreUnavailableError as e:
            if e.fault is not Fault.READ_ONLY:
                raise
            self.read_only = e
            return e
        self.read_only = None
        return None

    def condition(self) -> str | None:
        """What an operator should know about the database right now, in one line (None:
        nothing): that it is read-only, or that its file is gone. No query is made."""
        url = self._engine.url
        gone = file_gone(url.database) if url.get_backend_name() == "sqlite" else None
        if gone is not None:
            return f"incident database file {gone} is gone: nothing is recorded"
        if self.read_only is not None:
            return f"incident database {display_name(url)} is read-only: nothing is recorded"
        return None

    # -- schema ---------------------------------------------------------------------------

    def upgrade(self, *, revision: str = "head") -> None:
        """Bring the schema to `revision` (alembic upgrade head). Migrations run without the
        statement timeout: DDL on a large table may take minutes."""
        with self._guard(), self._engine.begin() as conn:
            _no_statement_timeout(conn)
            migrate.upgrade(conn, revision=revision)

    def downgrade(self, *, revision: str) -> None:
        with self._guard(), self._engine.begin() as conn:
            _no_statement_timeout(conn)
            migrate.downgrade(conn, revision=revision)

    def current_revision(self) -> str | None:
        with self._guard(), self._engine.connect() as conn:
            return migrate.current_revision(conn)

    # -- writes ---------------------------------------------------------------------------

    def record(
        self,
        report: TriageReport,
        *,
        requested_by: str | None,
        duration_ms: float,
        channel: str | None = None,
        source: str = "slack",
    ) -> RecordResult:
        """Store a triage as a run and open, continue or resolve the workload's incident.
        `source` says where it was asked: "slack" (the bot) or "cli"."""
        with self._guard():
            for attempt in range(1, _RECORD_ATTEMPTS + 1):
                try:
                    with self._write.begin() as session:
                        return record_run(
                            session,
                            report,
                            now=self._clock(),
                            requested_by=requested_by,
                            duration_ms=duration_ms,
                            channel=channel,
                            source=source,
                        )
                except exc.IntegrityError:
                    # Another writer opened the workload's incident first: retry, now seeing it.
                    if attempt == _RECORD_ATTEMPTS:
                        raise
                    log.info("incident for %s raced with another writer; retrying", report.pod)
        raise AssertionError("unreachable")

    def attach_thread(self, incident_id: int, *, thread: ThreadRef) -> None:
        """Remember the chat thread that follows this incident (the latest one wins)."""
        with self._guard(), self._write.begin() as session:
            row = self._row(session, incident_id)
            row.chat, row.channel, row.thread = thread.chat, thread.channel, thread.thread

    def set_status(self, incident_id: int, status: IncidentStatus, *, by: str | None) -> Incident:
        """Move along open → acknowledged → resolved. Setting the current status is a no-op."""
        status = IncidentStatus(status)
        with self._guard(), self._write.begin() as session:
            row = self._row(session, incident_id, lock=True)
            current = IncidentStatus(row.status)
            if status is current:
                return incident_of(row)
            if status not in _ALLOWED[current]:
                raise InvalidTransitionError(
                    f"incident {incident_id} is {current.value}; it cannot become {status.value}"
                )
            now = self._clock()
            if status is IncidentStatus.ACKNOWLEDGED:
                row.status, row.acknowledged_at, row.acknowledged_by = status.value, now, by
            else:
                resolve(row, at=now, by=by, resolution=Resolution.MANUAL)
            row.updated_at = now
            session.flush()
            return incident_of(row)

    def snooze(self, incident_id: int, *, until: datetime | timedelta, by: str | None) -> Incident:
        """Acknowledge until `until` (a time, or a span from now): the next run after it that
        still finds the cause opens it again. A resolved incident cannot be snoozed; snoozing
        again moves the time."""
        with self._guard(), self._write.begin() as session:
            row = self._row(session, incident_id, lock=True)
            if row.status == IncidentStatus.RESOLVED.value:
                raise InvalidTransitionError(
                    f"incident {incident_id} is resolved; it cannot be snoozed"
                )
            now = self._clock()
            if isinstance(until, timedelta):
                until = now + until
            if until <= now:
                raise InvalidTransitionError(
                    f"snooze time {until:%Y-%m-%d %H:%M} UTC has passed; give a later one"
                )
            if row.status == IncidentStatus.OPEN.value:
                row.status, row.acknowledged_at, row.acknowledged_by = (
                    IncidentStatus.ACKNOWLEDGED.value, now, by
                )  # fmt: skip
            row.snoozed_until, row.snoozed_by, row.updated_at = until, by, now
            session.flush()
            return incident_of(row)

    # -- reads ----------------------------------------------------------------------------

    def get(self, incident_id: int) -> Incident | None:
        if not 0 < incident_id <= MAX_ID:
            return None
        with self._guard(), self._read() as session:
            row = session.get(IncidentRow, incident_id)
            return incident_of(row) if row is not None else None

    def open_incident_for(self, *, cluster: str, namespace: str, name: str) -> Incident | None:
        """The workload's unresolved incident (the most recently updated, whatever its kind)."""
        with self._guard(), self._read() as session:
            row = session.scalars(
                select(IncidentRow)
                .where(
                    IncidentRow.cluster == cluster,
                    IncidentRow.namespace == namespace,
                    IncidentRow.name == name,
                    IncidentRow.status != IncidentStatus.RESOLVED.value,
                )
                .order_by(IncidentRow.updated_at.desc(), IncidentRow.id.desc())
                .limit(1)
            ).first()
            return incident_of(row) if row is not None else None

    def runs(self, incident_id: int) -> builtins.list[TriageRun]:
        """The incident's runs, oldest first."""
        if not 0 < incident_id <= MAX_ID:
            return []
        with self._guard(), self._read() as session:
            rows = session.scalars(
                select(TriageRunRow)
                .where(TriageRunRow.incident_id == incident_id)
                .order_by(TriageRunRow.created_at, TriageRunRow.id)
            ).all()
            return [_run(r) for r in rows]

    def list(
        self,
        *,
        status: IncidentStatus | None = None,
        layer: Layer | None = None,
        limit: int = 50,
        namespaces: Collection[str] | None = None,
        cluster: str | None = None,
    ) -> builtins.list[Incident]:
        """Incidents, most recently opened first (of `namespaces` and `cluster` only, when
        given)."""
        query = select(IncidentRow)
        if cluster is not None:
            query = query.where(IncidentRow.cluster == cluster)
        if namespaces is not None:
            query = query.where(IncidentRow.namespace.in_(builtins.list(namespaces)))
        if status is not None:
            query = query.where(IncidentRow.status == IncidentStatus(status).value)
        if layer is not None:
            query = query.where(IncidentRow.failing_layer == Layer(layer).value)
        query = query.order_by(IncidentRow.opened_at.desc(), IncidentRow.id.desc())
        with self._guard(), self._read() as session:
            return [incident_of(r) for r in session.scalars(query.limit(max(limit, 0))).all()]

    def open_counts(self) -> dict[Layer, int]:
        """Unresolved incidents per layer (every layer present, zero when none)."""
        with self._guard(), self._read() as session:
            rows = session.execute(
                select(IncidentRow.failing_layer, func.count())
                .where(IncidentRow.status != IncidentStatus.RESOLVED.value)
                .group_by(IncidentRow.failing_layer)
            ).all()
        return per_layer({layer: count for layer, count in rows})

    def resolution_times(self, *, within: timedelta) -> builtins.list[tuple[str, float]]:
        """(failing layer, seconds from opened to resolved) of each incident resolved in the
        last `within`: what `/metrics` summarises per scrape, over a bounded window."""
        since = self._clock() - within
        query = select(
            IncidentRow.failing_layer, IncidentRow.opened_at, IncidentRow.resolved_at
        ).where(
            IncidentRow.status == IncidentStatus.RESOLVED.value, IncidentRow.resolved_at >= since
        )
        with self._guard(), self._read() as session:
            rows = session.execute(query).all()
        return [
            (str(layer), (resolved - opened).total_seconds())
            for layer, opened, resolved in rows
            if layer is not None and resolved is not None
        ]

    def stats(
        self, *, cluster: str | None = None, where: Callable[[str, str], bool] | None = None
    ) -> Stats:
        """Counts per layer, open now (per layer), median time to resolve (overall, per
        layer), of every cluster or of `cluster`, and only of the incidents whose (cluster,
        namespace) `where` accepts (a tenant's view) when given."""
        query = select(
            IncidentRow.failing_layer,
            IncidentRow.status,
            IncidentRow.opened_at,
            IncidentRow.resolved_at,
            IncidentRow.cluster,
            IncidentRow.namespace,
            IncidentRow.acknowledged_at,
            IncidentRow.reopened_at,
        )
        if cluster is not None:
            query = query.where(IncidentRow.cluster == cluster)
        with self._guard(), self._read() as session:
            rows = session.execute(query).all()
        kept = [(*r[:4], *r[6:]) for r in rows if where is None or where(r[4], r[5])]
        return summarise(kept)

    def _row(self, session: Session, incident_id: int, *, lock: bool = False) -> IncidentRow:
        if not 0 < incident_id <= MAX_ID:
            raise IncidentNotFoundError(incident_id)
        row = session.get(IncidentRow, incident_id, with_for_update=lock)
        if row is None:
            raise IncidentNotFoundError(incident_id)
        return row


def _no_statement_timeout(conn: Connection) -> None:
    exempt(conn)
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql("SET LOCAL statement_timeout = 0")


def _run(row: TriageRunRow) -> TriageRun:
    return TriageRun.model_validate(row, from_attributes=True)
