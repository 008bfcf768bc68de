"""SQLAlchemy tables of the incident store. Only `incidents.store` and the migrations use them.

One rule the schema enforces itself: a workload has at most one incident that is not resolved
(partial unique index, PostgreSQL and SQLite alike), so two bot replicas recording the same
blocked pod at once cannot open two incidents.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    CheckConstraint,
    DateTime,
    Dialect,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeDecorator

# Named constraints keep SQLite batch migrations and downgrades deterministic.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

ACTIVE = text("status != 'resolved'")


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC in, timezone-aware UTC out, also on SQLite (which drops the offset)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to the incident store; use UTC-aware times")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


ReportJSON = JSON().with_variant(JSONB(), "postgresql")


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)


class IncidentRow(Base):
    __tablename__ = "incidents"
    __table_args__ = (
        CheckConstraint("status IN ('open', 'acknowledged', 'resolved')", name="status"),
        CheckConstraint(
            "resolution IS NULL OR resolution IN ('auto', 'superseded', 'manual')",
            name="resolution",
        ),
        Index(
            "uq_incidents_active_workload",
            "cluster",
            "namespace",
            "kind",
            "name",
            unique=True,
            sqlite_where=ACTIVE,
            postgresql_where=ACTIVE,
        ),
        Index("ix_incidents_workload", "cluster", "namespace", "name"),
        Index("ix_incidents_status_layer", "status", "failing_layer"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    cluster: Mapped[str] = mapped_column(String(253))
    namespace: Mapped[str] = mapped_column(String(63))
    kind: Mapped[str] = mapped_column(String(63))
    name: Mapped[str] = mapped_column(String(253))
    pod: Mapped[str | None] = mapped_column(String(253))
    failing_layer: Mapped[str | None] = mapped_column(String(32))
    fingerprint: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16))
    headline: Mapped[str] = mapped_column(Text)
    opened_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
    acknowledged_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    acknowledged_by: Mapped[str | None] = mapped_column(String(255))
    resolved_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    resolved_by: Mapped[str | None] = mapped_column(String(255))
    resolution: Mapped[str | None] = mapped_column(String(16))
    requested_by: Mapped[str | None] = mapped_column(String(255))
    # Where people follow it (incidents.values.ThreadRef): the chat, its channel and thread.
    chat: Mapped[str | None] = mapped_column(String(32))
    channel: Mapped[str | None] = mapped_column(String(64))
    thread: Mapped[str | None] = mapped_column(String(255))
    owner_team: Mapped[str | None] = mapped_column(String(255))
    owner_channel: Mapped[str | None] = mapped_column(String(255))
    owner_usergroup: Mapped[str | None] = mapped_column(String(64))
    run_count: Mapped[int] = mapped_column(Integer)
    # Snoozed: acknowledged until then; a run after it finds the cause still there reopens it.
    snoozed_until: Mapped[datetime | None] = mapped_column(UTCDateTime())
    snoozed_by: Mapped[str | None] = mapped_column(String(255))
    # A resolved incident whose cause came back is reopened, not opened anew (migration 0006).
    reopened_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    reopen_count: Mapped[int] = mapped_column(Integer, server_default="0", default=0)


class TriageRunRow(Base):
    __tablename__ = "triage_runs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    # NULL for a triage that found the workload running while nothing was open: it is still
    # kept (who asked, when, what it found) rather than silently dropped.
    incident_id: Mapped[int | None] = mapped_column(
        ForeignKey("incidents.id", ondelete="CASCADE"), index=True
    )
    cluster: Mapped[str] = mapped_column(String(253))
    namespace: Mapped[str] = mapped_column(String(63))
    kind: Mapped[str] = mapped_column(String(63))
    name: Mapped[str] = mapped_column(String(253))
    pod: Mapped[str | None] = mapped_column(String(253))
    failing_layer: Mapped[str | None] = mapped_column(String(32))
    fingerprint: Mapped[str] = mapped_column(String(64))
    headline: Mapped[str] = mapped_column(Text)
    report: Mapped[dict[str, Any]] = mapped_column(ReportJSON)
    duration_ms: Mapped[float] = mapped_column(Float)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)
    requested_by: Mapped[str | None] = mapped_column(String(255))
    channel: Mapped[str | None] = mapped_column(String(64))
    # Where the run came from: "slack" (the bot) or "cli" (`why-pending --record`).
    source: Mapped[str] = mapped_column(String(16), server_default="slack")


JOB_OPEN = text("done_at IS NULL AND payload IS NOT NULL")


class DeliveryRow(Base):
    """A Slack delivery seen (an event id, a command's trigger id): the primary key makes the
    first replica to insert it the one that answers.

    A command is also a job until it is answered: its payload (who asked, where, the text,
    the response URL), the replica that owns it and until when (`lease_until`, renewed while
    it runs), and the replica that claimed its reply. A job whose lease lapsed (its replica
    died) is claimed by another replica serving its cluster; `replied_by` keeps the answer
    to one replica whatever happens."""

    __tablename__ = "deliveries"
    __table_args__ = (
        Index(
            "ix_deliveries_open",
            "received_at",
            sqlite_where=JOB_OPEN,
            postgresql_where=JOB_OPEN,
        ),
    )

    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    received_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)
    kind: Mapped[str | None] = mapped_column(String(16))
    payload: Mapped[dict[str, Any] | None] = mapped_column(ReportJSON)
    cluster: Mapped[str | None] = mapped_column(String(253))
    owner: Mapped[str | None] = mapped_column(String(128))
    lease_until: Mapped[datetime | None] = mapped_column(UTCDateTime())
    attempts: Mapped[int] = mapped_column(Integer, server_default="0")
    replied_by: Mapped[str | None] = mapped_column(String(128))
    done_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class ReplicaRow(Base):
    """A running bot process: the clusters it serves and their cache state, refreshed every
    few seconds. Live rows tell a replica which other one can answer about a cluster it
    does not serve; `/gpu clusters` lists them all."""

    __tablename__ = "replicas"

    id: Mapped[str] = mapped_column(String(128), primary_key=True)
    started_at: Mapped[datetime] = mapped_column(UTCDateTime())
    seen_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)
    clusters: Mapped[list[dict[str, Any]]] = mapped_column(ReportJSON)


GROUP_ACTIVE = text("status = 'open'")


class GroupRow(Base):
    """A root cause shared by stuck workloads (the fleet view's group), followed as one
    incident: at most one open per cluster and cause key, so replicas cannot open two."""

    __tablename__ = "incident_groups"
    __table_args__ = (
        CheckConstraint("status IN ('open', 'resolved')", name="status"),
        Index(
            "uq_incident_groups_active_key",
            "cluster",
            "key",
            unique=True,
            sqlite_where=GROUP_ACTIVE,
            postgresql_where=GROUP_ACTIVE,
        ),
        Index("ix_incident_groups_channel_posted", "channel", "posted_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    cluster: Mapped[str] = mapped_column(String(253))
    key: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16))
    layer: Mapped[str] = mapped_column(String(32))
    code: Mapped[str] = mapped_column(String(128))
    cause: Mapped[str] = mapped_column(Text)
    owner_team: Mapped[str | None] = mapped_column(String(255))
    owner_channel: Mapped[str | None] = mapped_column(String(255))
    workloads: Mapped[int] = mapped_column(Integer)
    gpus: Mapped[int] = mapped_column(Integer)
    members: Mapped[list[dict[str, Any]]] = mapped_column(ReportJSON)
    members_hash: Mapped[str] = mapped_column(String(64))
    version: Mapped[int] = mapped_column(Integer)
    opened_at: Mapped[datetime] = mapped_column(UTCDateTime())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime())
    resolved_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    chat: Mapped[str | None] = mapped_column(String(32))
    channel: Mapped[str | None] = mapped_column(String(255))
    thread: Mapped[str | None] = mapped_column(String(255))
    posted_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    announced_workloads: Mapped[int] = mapped_column(Integer)
