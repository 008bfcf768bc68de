"""The bot replicas running against this database and the clusters each serves, so that one
replica can hand a command to another that serves its cluster, and `/gpu clusters` lists the
whole deployment. Each replica rewrites its row every few seconds; a row not rewritten for a
while is a replica that is gone."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from incidents.database import Book
from incidents.models import ReplicaRow

FORGET = timedelta(hours=1)  # rows of replicas gone this long are deleted


@dataclass(frozen=True, slots=True)
class Replica:
    id: str
    seen_at: datetime
    clusters: list[dict[str, Any]]  # SourceStatus fields, one per cluster served


class ReplicaBook(Book):
    """The replicas table. Obtained as `IncidentStore.replicas`."""

    def beat(self, replica: str, *, started_at: datetime, clusters: list[dict[str, Any]]) -> None:
        """Say `replica` is alive and serves `clusters` (their state as of now)."""
        now = self._clock()
        with self._guard(), self._write.begin() as session:
            insert = pg_insert if session.get_bind().dialect.name == "postgresql" else sqlite_insert
            stmt = insert(ReplicaRow).values(
                id=replica, started_at=started_at, seen_at=now, clusters=clusters
            )
            session.execute(
                stmt.on_conflict_do_update(
                    index_elements=["id"], set_={"seen_at": now, "clusters": clusters}
                )
            )
            session.execute(delete(ReplicaRow).where(ReplicaRow.seen_at < now - FORGET))

    def live(self, *, within: timedelta) -> list[Replica]:
        """Replicas heard from in the last `within`, oldest first."""
        with self._guard(), self._read() as session:
            rows = session.scalars(
                select(ReplicaRow)
                .where(ReplicaRow.seen_at >= self._clock() - within)
                .order_by(ReplicaRow.started_at, ReplicaRow.id)
            ).all()
            return [Replica(r.id, r.seen_at, list(r.clusters or [])) for r in rows]

    def leave(self, replica: str) -> None:
        with self._guard(), self._write.begin() as session:
            session.execute(delete(ReplicaRow).where(ReplicaRow.id == replica))
