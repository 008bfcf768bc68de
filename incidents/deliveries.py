"""Slack deliveries already seen, kept in the incident database so that a retry is answered
once whether it reaches the same process, a restarted one or another replica.

Slack re-sends an event it thinks went unanswered (`X-Slack-Retry-Num`); a proxy or a client
may re-send a command. Each delivery carries a key (the event id, the command's or button's
trigger id): the first insert of a key wins, by the primary key, on SQLite and PostgreSQL
alike; a repeat finds it there. Keys older than a day are dropped (Slack retries within
minutes).

Every delivery is a write before its ack, so concurrent deliveries commit together (group
commit): the first caller writes what has queued up while it waits for the database, the
others wait for its one transaction. Fifty deliveries at once cost one commit, not fifty.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime, timedelta

from sqlalchemy import delete
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session, sessionmaker

from incidents.models import DeliveryRow

KEEP = timedelta(days=1)
PRUNE_EVERY = 500  # commits between two prunings of old keys


class _Asked:
    __slots__ = ("done", "error", "first", "key")

    def __init__(self, key: str) -> None:
        self.key, self.first, self.done = key[:200], False, False
        self.error: BaseException | None = None


class DeliveryLog:
    def __init__(
        self,
        *,
        write: sessionmaker[Session],
        guard: Callable[[], AbstractContextManager[None]],
        clock: Callable[[], datetime],
    ) -> None:
        self._write, self._guard, self._clock = write, guard, clock
        self._cond = threading.Condition()
        self._queue: list[_Asked] = []
        self._writing = False
        self._commits = 0

    def first_time(self, key: str) -> bool:
        """Record the delivery `key`; True when no process recorded it before.

        Raises `StoreUnavailableError` when the database cannot be written."""
        mine = _Asked(key)
        with self._cond:
            self._queue.append(mine)
            while self._writing and not mine.done:
                self._cond.wait()
            if not mine.done:  # nobody is writing: write everything queued, this one included
                batch, self._queue, self._writing = self._queue, [], True
        if not mine.done:
            self._commit(batch)
        if mine.error is not None:
            raise mine.error
        return mine.first

    def _commit(self, batch: list[_Asked]) -> None:
        try:
            new = self._insert(list(dict.fromkeys(a.key for a in batch)))
            for a in batch:
                a.first = a.key in new
                new.discard(a.key)  # a key twice in one batch: its first delivery wins
        except BaseException as e:
            for a in batch:
                a.error = e
        finally:
            with self._cond:
                for a in batch:
                    a.done = True
                self._writing = False
                self._cond.notify_all()

    def _insert(self, keys: list[str]) -> set[str]:
        now = self._clock()
        with self._guard(), self._write.begin() as session:
            dialect = session.get_bind().dialect.name
            insert = pg_insert if dialect == "postgresql" else sqlite_insert
            stmt = (
                insert(DeliveryRow)
                .values([{"key": k, "received_at": now} for k in keys])
                .on_conflict_do_nothing(index_elements=["key"])
                .returning(DeliveryRow.key)
            )
            new = set(session.scalars(stmt).all())
            self._commits += 1
            if self._commits % PRUNE_EVERY == 0:
                session.execute(delete(DeliveryRow).where(DeliveryRow.received_at < now - KEEP))
        return new
