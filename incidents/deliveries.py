"""Slack deliveries already seen, kept in the incident database so that a retry is answered
once whether it reaches the same process, a restarted one or another replica.

Slack re-sends an event it thinks went unanswered (`X-Slack-Retry-Num`); a proxy or a client
may re-send a command. Each delivery carries a key (the event id, the command's or button's
trigger id): the first insert of a key wins, by the primary key, on SQLite and PostgreSQL
alike; a repeat finds it there. Keys older than a day are dropped (Slack retries within
minutes).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime, timedelta

from sqlalchemy import delete
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session, sessionmaker

from incidents.models import DeliveryRow

KEEP = timedelta(days=1)
PRUNE_EVERY = 500  # inserts between two prunings of old keys


class DeliveryLog:
    def __init__(
        self,
        *,
        write: sessionmaker[Session],
        guard: Callable[[], AbstractContextManager[None]],
        clock: Callable[[], datetime],
    ) -> None:
        self._write, self._guard, self._clock = write, guard, clock
        self._inserts = 0

    def first_time(self, key: str) -> bool:
        """Record the delivery `key`; True when no process recorded it before.

        Raises `StoreUnavailableError` when the database cannot be written."""
        now = self._clock()
        with self._guard(), self._write.begin() as session:
            dialect = session.get_bind().dialect.name
            insert = pg_insert if dialect == "postgresql" else sqlite_insert
            stmt = (
                insert(DeliveryRow)
                .values(key=key[:200], received_at=now)
                .on_conflict_do_nothing(index_elements=["key"])
                .returning(DeliveryRow.key)
            )
            inserted = session.execute(stmt).first() is not None
            self._inserts += 1
            if self._inserts % PRUNE_EVERY == 0:
                session.execute(delete(DeliveryRow).where(DeliveryRow.received_at < now - KEEP))
        return inserted
