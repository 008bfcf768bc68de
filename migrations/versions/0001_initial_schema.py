"""Initial schema: incidents and triage runs.

Revision ID: 0001
Revises:
Create Date: 2026-12-02 15:32:22+00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

ACTIVE = sa.text("status != 'resolved'")


def upgrade() -> None:
    op.create_table(
        "incidents",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("cluster", sa.String(length=253), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("kind", sa.String(length=63), nullable=False),
        sa.Column("name", sa.String(length=253), nullable=False),
        sa.Column("pod", sa.String(length=253), nullable=True),
        sa.Column("failing_layer", sa.String(length=32), nullable=True),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("headline", sa.Text(), nullable=False),
        sa.Column("opened_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("acknowledged_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("acknowledged_by", sa.String(length=255), nullable=True),
        sa.Column("resolved_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("resolved_by", sa.String(length=255), nullable=True),
        sa.Column("resolution", sa.String(length=16), nullable=True),
        sa.Column("requested_by", sa.String(length=255), nullable=True),
        sa.Column("channel", sa.String(length=64), nullable=True),
        sa.Column("thread_ts", sa.String(length=32), nullable=True),
        sa.Column("owner_team", sa.String(length=255), nullable=True),
        sa.Column("owner_channel", sa.String(length=255), nullable=True),
        sa.Column("owner_usergroup", sa.String(length=64), nullable=True),
        sa.Column("run_count", sa.Integer(), nullable=False),
        sa.CheckConstraint(
            "resolution IS NULL OR resolution IN ('auto', 'superseded', 'manual')",
            name=op.f("ck_incidents_resolution"),
        ),
        sa.CheckConstraint(
            "status IN ('open', 'acknowledged', 'resolved')", name=op.f("ck_incidents_status")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_incidents")),
    )
    op.create_index("ix_incidents_status_layer", "incidents", ["status", "failing_layer"])
    op.create_index("ix_incidents_workload", "incidents", ["cluster", "namespace", "name"])
    # One unresolved incident per workload: concurrent writers cannot open duplicates.
    op.create_index(
        "uq_incidents_active_workload",
        "incidents",
        ["cluster", "namespace", "kind", "name"],
        unique=True,
        sqlite_where=ACTIVE,
        postgresql_where=ACTIVE,
    )

    op.create_table(
        "triage_runs",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("incident_id", sa.Integer(), nullable=True),
        sa.Column("cluster", sa.String(length=253), nullable=False),
        sa.Column("namespace", sa.String(length=63), nullable=False),
        sa.Column("kind", sa.String(length=63), nullable=False),
        sa.Column("name", sa.String(length=253), nullable=False),
        sa.Column("pod", sa.String(length=253), nullable=True),
        sa.Column("failing_layer", sa.String(length=32), nullable=True),
        sa.Column("fingerprint", sa.String(length=64), nullable=False),
        sa.Column("headline", sa.Text(), nullable=False),
        sa.Column(
            "report",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("duration_ms", sa.Float(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("requested_by", sa.String(length=255), nullable=True),
        sa.Column("channel", sa.String(length=64), nullable=True),
        sa.ForeignKeyConstraint(
            ["incident_id"],
            ["incidents.id"],
            name=op.f("fk_triage_runs_incident_id_incidents"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_triage_runs")),
    )
    op.create_index(op.f("ix_triage_runs_created_at"), "triage_runs", ["created_at"])
    op.create_index(op.f("ix_triage_runs_incident_id"), "triage_runs", ["incident_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_triage_runs_incident_id"), table_name="triage_runs")
    op.drop_index(op.f("ix_triage_runs_created_at"), table_name="triage_runs")
    op.drop_table("triage_runs")
    op.drop_index("uq_incidents_active_workload", table_name="incidents")
    op.drop_index("ix_incidents_workload", table_name="incidents")
    op.drop_index("ix_incidents_status_layer", table_name="incidents")
    op.drop_table("incidents")
