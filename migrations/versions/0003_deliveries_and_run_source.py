"""Slack deliveries seen (retries answered once across restarts and replicas), and where each
triage run came from (Slack, the CLI).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-05 12:30:00+00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "deliveries",
        sa.Column("key", sa.String(length=200), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_deliveries")),
    )
    op.create_index(op.f("ix_deliveries_received_at"), "deliveries", ["received_at"])
    with op.batch_alter_table("triage_runs") as batch:
        batch.add_column(
            sa.Column("source", sa.String(length=16), nullable=False, server_default="slack")
        )


def downgrade() -> None:
    with op.batch_alter_table("triage_runs") as batch:
        batch.drop_column("source")
    op.drop_index(op.f("ix_deliveries_received_at"), table_name="deliveries")
    op.drop_table("deliveries")
