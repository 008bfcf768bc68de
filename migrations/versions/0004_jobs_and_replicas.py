"""Commands as jobs until answered (payload, owner, lease, reply claim), so a replica that
dies mid-triage is replaced by another; and the replicas table (who serves which cluster).

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-05 13:40:00+00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(JSONB(), "postgresql")
OPEN = sa.text("done_at IS NULL AND payload IS NOT NULL")


def upgrade() -> None:
    with op.batch_alter_table("deliveries") as batch:
        batch.add_column(sa.Column("kind", sa.String(length=16), nullable=True))
        batch.add_column(sa.Column("payload", JSON, nullable=True))
        batch.add_column(sa.Column("cluster", sa.String(length=253), nullable=True))
        batch.add_column(sa.Column("owner", sa.String(length=128), nullable=True))
        batch.add_column(sa.Column("lease_until", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"))
        batch.add_column(sa.Column("replied_by", sa.String(length=128), nullable=True))
        batch.add_column(sa.Column("done_at", sa.DateTime(timezone=True), nullable=True))
    op.create_index(
        "ix_deliveries_open",
        "deliveries",
        ["received_at"],
        sqlite_where=OPEN,
        postgresql_where=OPEN,
    )
    op.create_table(
        "replicas",
        sa.Column("id", sa.String(length=128), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("clusters", JSON, nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_replicas")),
    )
    op.create_index(op.f("ix_replicas_seen_at"), "replicas", ["seen_at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_replicas_seen_at"), table_name="replicas")
    op.drop_table("replicas")
    op.drop_index("ix_deliveries_open", table_name="deliveries")
    with op.batch_alter_table("deliveries") as batch:
        for column in (
            "done_at",
            "replied_by",
            "attempts",
            "lease_until",
            "owner",
            "cluster",
            "payload",
            "kind",
        ):
            batch.drop_column(column)
