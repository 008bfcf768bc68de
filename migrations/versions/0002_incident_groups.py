"""Incident groups: a root cause shared by stuck workloads, and the Slack alert that follows it.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-04 21:50:00+00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

GROUP_ACTIVE = sa.text("status = 'open'")


def upgrade() -> None:
    op.create_table(
        "incident_groups",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("cluster", sa.String(length=253), nullable=False),
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("layer", sa.String(length=32), nullable=False),
        sa.Column("code", sa.String(length=128), nullable=False),
        sa.Column("cause", sa.Text(), nullable=False),
        sa.Column("owner_team", sa.String(length=255), nullable=True),
        sa.Column("owner_channel", sa.String(length=255), nullable=True),
        sa.Column("workloads", sa.Integer(), nullable=False),
        sa.Column("gpus", sa.Integer(), nullable=False),
        sa.Column(
            "members",
            sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), "postgresql"),
            nullable=False,
        ),
        sa.Column("members_hash", sa.String(length=64), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("opened_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("resolved_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("channel", sa.String(length=255), nullable=True),
        sa.Column("thread_ts", sa.String(length=32), nullable=True),
        sa.Column("posted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("announced_workloads", sa.Integer(), nullable=False),
        sa.CheckConstraint(
            "status IN ('open', 'resolved')", name=op.f("ck_incident_groups_status")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_incident_groups")),
    )
    op.create_index(
        "uq_incident_groups_active_key",
        "incident_groups",
        ["cluster", "key"],
        unique=True,
        sqlite_where=GROUP_ACTIVE,
        postgresql_where=GROUP_ACTIVE,
    )
    op.create_index(
        "ix_incident_groups_channel_posted", "incident_groups", ["channel", "posted_at"]
    )


def downgrade() -> None:
    op.drop_index("ix_incident_groups_channel_posted", table_name="incident_groups")
    op.drop_index("uq_incident_groups_active_key", table_name="incident_groups")
    op.drop_table("incident_groups")
