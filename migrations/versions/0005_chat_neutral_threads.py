"""Chat-neutral thread references: an incident's (and a group's) thread is a (chat, channel,
thread) triple, no longer Slack's channel and `ts`, so another chat's adapter can follow an
incident without a schema of its own. Existing rows were all written by the Slack bot.

The columns are added and dropped in place (SQLite 3.35+ and PostgreSQL alike): a batch copy of
`incidents` would drop the old table, and with SQLite's foreign keys on that cascades into the
triage runs.

Revision ID: 0005
Revises: 0004
Create Date: 2027-01-12 10:00:00+00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLES = ("incidents", "incident_groups")
SLACK_TS = 32  # the old column's width: Slack's ts, "1700000000.000100"


def upgrade() -> None:
    for table in TABLES:
        op.add_column(table, sa.Column("chat", sa.String(length=32), nullable=True))
        op.add_column(table, sa.Column("thread", sa.String(length=255), nullable=True))
        # Every channel and thread recorded so far is Slack's.
        op.execute(
            f"UPDATE {table} SET chat = 'slack', thread = thread_ts "
            "WHERE channel IS NOT NULL OR thread_ts IS NOT NULL"
        )
        op.execute(f"ALTER TABLE {table} DROP COLUMN thread_ts")


def downgrade() -> None:
    for table in TABLES:
        op.add_column(table, sa.Column("thread_ts", sa.String(length=SLACK_TS), nullable=True))
        op.execute(
            f"UPDATE {table} SET thread_ts = thread "
            f"WHERE chat = 'slack' AND length(thread) <= {SLACK_TS}"
        )
        # The old schema reads any channel as Slack's: another chat's is forgotten.
        op.execute(f"UPDATE {table} SET channel = NULL WHERE chat IS NOT NULL AND chat != 'slack'")
        op.execute(f"ALTER TABLE {table} DROP COLUMN thread")
        op.execute(f"ALTER TABLE {table} DROP COLUMN chat")
