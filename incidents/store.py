"""The repository: the only place that reads or writes incidents. No SQL lives anywhere else.

`record()` turns each triage into durable history:
- blocked, same cause as the workload's open incident → the run is appended to it;
- blocked, different cause → the old incident is resolved as *superseded* and a new one opens
  (so "open now" always shows each workload's current cause, once);
- not blocked → open incidents for the workload are resolved automatically, the run appended;
  with nothing open the run is kept on its own.
A partial unique index allows one unresolved incident per workload; a concurrent writer that
loses the race gets an IntegrityError and retries, finding the winner's incident.
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

from sqlalchemy import Engine, exc, func, select
from sqlalchemy.orm import Session, sessionmaker

from incidents import migrate
from incidents.database import (
    WRITE_OPTION,
    auto_migrate_from_env,
    create_store_engine,
    prepare_sqlite,
    resolve_url,
    unavailable,
)
from incidents.deliveries import DeliveryLog
from incidents.errors import IncidentNotFoundError, InvalidTransitionError
from incidents.groups import GroupBook
from incidents.models import IncidentRow, TriageRunRow
from incidents.replicas import ReplicaBook
from incidents.summary import per_layer, summarise
from incidents.values import (
    Incident,
    IncidentStatus,
    RecordResult,
    Resolution,
    Stats,
    TriageRun,
)
from triage.model import Answer, Layer, TriageReport

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]
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

    @classmethod
    def from_url(cls, url: str | None = None) -> IncidentStore:
        """None → `DATABASE_URL` → SQLite at `$GPU_TRIAGE_DATA_DIR/incidents.sqlite`."""
        return cls(create_store_engine(resolve_url(url)))

    @classmethod
    def open(cls, url: str | None = None, *, auto_migrate: bool | None = None) -> IncidentStore:
        """`from_url`, then `upgrade()` when asked to (None → `GPU_TRIAGE_AUTO_MIGRATE`)."""
        store = cls.from_url(url)
        if auto_migrate if auto_migrate is not None else auto_migrate_from_env():
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

    # -- schema ---------------------------------------------------------------------------

    def upgrade(self, *, revision: str = "head") -> None:
        """Bring the schema to `revision` (alembic upgrade head)."""
        with self._guard(), self._engine.begin() as conn:
            migrate.upgrade(conn, revision=revision)

    def downgrade(self, *, revision: str) -> None:
        with self._guard(), self._engine.begin() as conn:
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
                        return self._record(
                            session,
                            report,
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

    def _record(
        self,
        session: Session,
        report: TriageReport,
        *,
        requested_by: str | None,
        duration_ms: float,
        channel: str | None,
        source: str,
    ) -> RecordResult:
        now = self._clock()
        ref = report.pod
        active = session.scalars(
            select(IncidentRow)
            .where(
                IncidentRow.cluster == report.cluster,
                IncidentRow.namespace == ref.namespace,
                IncidentRow.kind == ref.kind,
                IncidentRow.name == ref.name,
                IncidentRow.status != IncidentStatus.RESOLVED.value,
            )
            .order_by(IncidentRow.id)
            .with_for_update()
        ).all()
        fingerprint = report.fingerprint
        resolved: builtins.list[int] = []
        target: IncidentRow | None = None
        created = False
        unknown = report.answer == Answer.UNKNOWN
        for row in active:
            if unknown:  # a run that could not judge the cause neither opens nor resolves
                target = target or row
                continue
            if report.blocked and row.fingerprint == fingerprint and target is None:
                target = row
                continue
            why = Resolution.SUPERSEDED if report.blocked else Resolution.AUTO
            _resolve(row, at=now, by=requested_by, resolution=why)
            resolved.append(row.id)
            if not report.blocked:
                target = row  # the run that found the workload running belongs to it
        session.flush()  # resolutions first: the unique index then admits a new incident
        if report.blocked and target is None and not unknown:
            target = IncidentRow(
                cluster=report.cluster,
                namespace=ref.namespace,
                kind=ref.kind,
                name=ref.name,
                fingerprint=fingerprint,
                status=IncidentStatus.OPEN.value,
                opened_at=now,
                requested_by=requested_by,
                channel=channel,
                run_count=0,
            )
            session.add(target)
            created = True
        if target is not None:
            target.run_count += 1
            target.updated_at = now
            if target.status != IncidentStatus.RESOLVED.value or created:
                _refresh(target, report)
        run = TriageRunRow(
            cluster=report.cluster,
            namespace=ref.namespace,
            kind=ref.kind,
            name=ref.name,
            pod=ref.pod,
            failing_layer=_layer_value(report.failing_layer),
            fingerprint=fingerprint,
            headline=report.headline,
            report=report.model_dump(mode="json"),
            duration_ms=duration_ms,
            created_at=now,
            requested_by=requested_by,
            channel=channel,
            source=source,
        )
        session.flush()
        run.incident_id = target.id if target is not None else None
        session.add(run)
        session.flush()
        return RecordResult(
            incident=_incident(target) if target is not None else None,
            created=created,
            auto_resolved=resolved,
            run_id=run.id,
        )

    def attach_thread(self, incident_id: int, *, channel: str, thread_ts: str) -> None:
        """Remember the Slack thread that follows this incident (the latest one wins)."""
        with self._guard(), self._write.begin() as session:
            row = self._row(session, incident_id)
            row.channel, row.thread_ts = channel, thread_ts

    def set_status(self, incident_id: int, status: IncidentStatus, *, by: str | None) -> Incident:
        """Move along open → acknowledged → resolved. Setting the current status is a no-op."""
        status = IncidentStatus(status)
        with self._guard(), self._write.begin() as session:
            row = self._row(session, incident_id, lock=True)
            current = IncidentStatus(row.status)
            if status is current:
                return _incident(row)
            if status not in _ALLOWED[current]:
                raise InvalidTransitionError(
                    f"incident {incident_id} is {current.value}; it cannot become {status.value}"
                )
            now = self._clock()
            if status is IncidentStatus.ACKNOWLEDGED:
                row.status, row.acknowledged_at, row.acknowledged_by = status.value, now, by
            else:
                _resolve(row, at=now, by=by, resolution=Resolution.MANUAL)
            row.updated_at = now
            session.flush()
            return _incident(row)

    # -- reads ----------------------------------------------------------------------------

    def get(self, incident_id: int) -> Incident | None:
        with self._guard(), self._read() as session:
            row = session.get(IncidentRow, incident_id)
            return _incident(row) if row is not None else None

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
            return _incident(row) if row is not None else None

    def runs(self, incident_id: int) -> builtins.list[TriageRun]:
        """The incident's runs, oldest first."""
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
            return [_incident(r) for r in session.scalars(query.limit(max(limit, 0))).all()]

    def open_counts(self) -> dict[Layer, int]:
        """Unresolved incidents per layer (every layer present, zero when none)."""
        with self._guard(), self._read() as session:
            rows = session.execute(
                select(IncidentRow.failing_layer, func.count())
                .where(IncidentRow.status != IncidentStatus.RESOLVED.value)
                .group_by(IncidentRow.failing_layer)
            ).all()
        return per_layer({layer: count for layer, count in rows})

    def stats(self, *, cluster: str | None = None) -> Stats:
        """Counts per layer, open now (per layer), median time to resolve (overall, per
        layer), of every cluster or of `cluster`."""
        query = select(
            IncidentRow.failing_layer,
            IncidentRow.status,
            IncidentRow.opened_at,
            IncidentRow.resolved_at,
        )
        if cluster is not None:
            query = query.where(IncidentRow.cluster == cluster)
        with self._guard(), self._read() as session:
            rows = session.execute(query).all()
        return summarise(rows)

    def _row(self, session: Session, incident_id: int, *, lock: bool = False) -> IncidentRow:
        row = session.get(IncidentRow, incident_id, with_for_update=lock)
        if row is None:
            raise IncidentNotFoundError(incident_id)
        return row


def _resolve(row: IncidentRow, *, at: datetime, by: str | None, resolution: Resolution) -> None:
    row.status = IncidentStatus.RESOLVED.value
    row.resolved_at, row.resolved_by, row.resolution = at, by, resolution.value
    row.updated_at = at


def _refresh(row: IncidentRow, report: TriageReport) -> None:
    """Latest view of an incident still being followed: examined pod, headline, owner."""
    row.pod = report.pod.pod or (report.pod.name if report.pod.kind == "Pod" else row.pod)
    row.failing_layer = _layer_value(report.failing_layer) or row.failing_layer
    row.headline = report.headline
    if report.owner is not None:
        row.owner_team = report.owner.team
        row.owner_channel = report.owner.channel
        row.owner_usergroup = report.owner.usergroup


def _layer_value(layer: Layer | None) -> str | None:
    return layer.value if layer is not None else None


def _incident(row: IncidentRow) -> Incident:
    return Incident.model_validate(row, from_attributes=True)


def _run(row: TriageRunRow) -> TriageRun:
    return TriageRun.model_validate(row, from_attributes=True)
