"""The incident lifecycle: snoozed until a time (and by whom), and reopened when its cause
returns after it was resolved (when, how often), so `stats` can say how long acknowledging
and resolving take by layer without counting a reopened incident twice.

Columns are added and dropped in place (SQLite 3.35+ and PostgreSQL alike), as in 0005: a
batch copy of `incidents` would cascade into the triage runs.

Revision ID: 0006
Revises: 0005
Create Date: 2027-02-02 10:00:00+00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "incidents", sa.Column("snoozed_until", sa.DateTime(timezone=True), nullable=True)
    )
    op.add_column("incidents", sa.Column("snoozed_by", sa.String(length=255), nullable=True))
    op.add_column("incidents", sa.Column("reopened_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column(
        "incidents",
        sa.Column("reopen_count", sa.Integer(), nullable=False, server_default="0"),
    )


def downgrade() -> None:
    for column in ("reopen_count", "reopened_at", "snoozed_by", "snoozed_until"):
        op.execute(f"ALTER TABLE incidents DROP COLUMN {column}")
