"""Slack deliveries already seen, and the commands among them still to answer, kept in the
incident database so that each is answered once whether a retry reaches the same process, a
restarted one or another replica, and whichever replica dies mid-triage.

Slack re-sends an event it thinks went unanswered (`X-Slack-Retry-Num`); a proxy or a client
may re-send a command. Each delivery carries a key (the event id, the command's or button's
trigger id): the first insert of a key wins, by the primary key, on SQLite and PostgreSQL
alike; a repeat finds it there. Keys older than a day are dropped (Slack retries within
minutes).

A command is inserted as a job: its payload (enough to answer it again), the replica that
took it and a lease that replica renews while it works. When the lease lapses (the replica
died, or lost the database), another replica serving the job's cluster claims it: a
conditional UPDATE on the row (behind `FOR UPDATE SKIP LOCKED` on PostgreSQL) lets one claimer
win. Before its first Slack write a replica claims the job's reply (`replied_by`), so a
command gets one answer even when a replica thought dead was only slow. A command can also be
handed to another replica (one that serves the cluster asked about): the row loses its owner
and waits for a claimer serving that cluster.

Every delivery is a write before its ack, so concurrent deliveries commit together (group
commit): the first caller writes what has queued up while it waits for the database, the
others wait for its one transaction. Fifty deliveries at once cost one commit, not fifty.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection, Iterable
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import and_, delete, or_, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session, sessionmaker

from incidents.models import DeliveryRow
from incidents.values import Job, NewJob

KEEP = timedelta(days=1)
PRUNE_EVERY = 500  # commits between two prunings of old keys
MAX_ATTEMPTS = 3  # a job that took down this many replicas is dropped, not retried forever


class _Asked:
    __slots__ = ("done", "error", "first", "job", "key")

    def __init__(self, key: str, job: NewJob | None) -> None:
        self.key, self.job, self.first, self.done = key[:200], job, False, False
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

    def first_time(self, key: str, job: NewJob | None = None) -> bool:
        """Record the delivery `key` (with its `job`, owned by `job.owner` from now on); True
        when no process recorded it before.

        Raises `StoreUnavailableError` when the database cannot be written."""
        mine = _Asked(key, job)
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
            new = self._insert(list({a.key: a for a in batch}.values()))
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

    def _insert(self, asked: list[_Asked]) -> set[str]:
        now = self._clock()
        rows = [_row(a, now) for a in asked]
        with self._guard(), self._write.begin() as session:
            dialect = session.get_bind().dialect.name
            insert = pg_insert if dialect == "postgresql" else sqlite_insert
            new: set[str] = set()
            # A multi-row INSERT needs the same columns in each row: jobs, then plain keys.
            for same in (
                [r for r in rows if "payload" in r],
                [r for r in rows if "payload" not in r],
            ):
                if same:
                    stmt = (
                        insert(DeliveryRow)
                        .values(same)
                        .on_conflict_do_nothing(index_elements=["key"])
                        .returning(DeliveryRow.key)
                    )
                    new.update(session.scalars(stmt).all())
            self._commits += 1
            if self._commits % PRUNE_EVERY == 0:
                session.execute(delete(DeliveryRow).where(DeliveryRow.received_at < now - KEEP))
        return new

    # -- jobs --------------------------------------------------------------------------------
    def hand_off(self, key: str, *, owner: str, cluster: str) -> bool:
        """Give job `key` up to whichever replica serves `cluster`; False when `owner` no
        longer held it."""
        with self._guard(), self._write.begin() as session:
            done = session.execute(
                update(DeliveryRow)
                .where(DeliveryRow.key == key, DeliveryRow.owner == owner)
                .values(owner=None, lease_until=None, cluster=cluster)
            )
            return bool(done.rowcount == 1)  # type: ignore[attr-defined]

    def renew(self, keys: Collection[str], *, owner: str, lease: timedelta) -> set[str]:
        """Extend `owner`'s lease on `keys`; the keys it still holds."""
        if not keys:
            return set()
        with self._guard(), self._write.begin() as session:
            held = session.scalars(
                update(DeliveryRow)
                .where(
                    DeliveryRow.key.in_(list(keys)),
                    DeliveryRow.owner == owner,
                    DeliveryRow.done_at.is_(None),
                )
                .values(lease_until=self._clock() + lease)
                .returning(DeliveryRow.key)
            ).all()
        return set(held)

    def finish(self, keys: Iterable[str]) -> None:
        """Mark jobs answered; their payloads (with the response URL) are dropped."""
        keys = list(keys)
        if not keys:
            return
        with self._guard(), self._write.begin() as session:
            session.execute(
                update(DeliveryRow).where(DeliveryRow.key.in_(keys)).values(_done(self._clock()))
            )

    def claim_reply(self, key: str, *, owner: str) -> bool:
        """True when `owner` is (now) the one replica that answers job `key`. A key whose
        delivery was never recorded (the database failed before the ack) is recorded here,
        replied by `owner`: a Slack retry reaching another replica is then dropped there."""
        with self._guard(), self._write.begin() as session:
            dialect = session.get_bind().dialect.name
            insert = pg_insert if dialect == "postgresql" else sqlite_insert
            stmt = insert(DeliveryRow).values(
                key=key[:200], received_at=self._clock(), replied_by=owner, owner=owner
            )
            mine = session.scalars(
                stmt.on_conflict_do_update(
                    index_elements=["key"],
                    set_={"replied_by": owner},
                    where=or_(DeliveryRow.replied_by.is_(None), DeliveryRow.replied_by == owner),
                ).returning(DeliveryRow.key)
            ).first()
            return mine is not None

    def claim(
        self,
        *,
        owner: str,
        clusters: Collection[str],
        lease: timedelta,
        max_age: timedelta,
        limit: int = 8,
    ) -> tuple[list[Job], list[str]]:
        """Take up to `limit` jobs nobody holds (lease lapsed, or handed off) that `owner` can
        run: any cluster's when the job names none, else one of `clusters`. Returns the jobs
        taken and the keys dropped: answered already, too old to answer (Slack's response
        URL lasts 30 minutes), or after `MAX_ATTEMPTS` replicas took them."""
        now = self._clock()
        runnable = or_(DeliveryRow.cluster.is_(None), DeliveryRow.cluster.in_(list(clusters)))
        free = and_(
            DeliveryRow.done_at.is_(None),
            DeliveryRow.payload.is_not(None),
            or_(DeliveryRow.lease_until.is_(None), DeliveryRow.lease_until < now),
        )
        taken: list[Job] = []
        dropped: list[str] = []
        with self._guard(), self._write.begin() as session:
            rows = session.scalars(
                select(DeliveryRow)
                .where(free, runnable)
                .order_by(DeliveryRow.received_at)
                .limit(limit)
                .with_for_update(skip_locked=True)  # PostgreSQL; SQLite writes one at a time
            ).all()
            for row in rows:
                key, kind, payload, cluster = row.key, row.kind, row.payload, row.cluster
                attempts, received_at = row.attempts + 1, row.received_at
                gone = (
                    row.replied_by is not None
                    or row.received_at < now - max_age
                    or row.attempts >= MAX_ATTEMPTS
                )
                values: dict[str, Any] = (
                    _done(now)
                    if gone
                    else {"owner": owner, "lease_until": now + lease, "attempts": attempts}
                )
                won = session.execute(
                    update(DeliveryRow)
                    .where(DeliveryRow.key == key, free)
                    .values(values)
                    .execution_options(synchronize_session=False)
                )
                if won.rowcount != 1:  # type: ignore[attr-defined]
                    continue  # another replica took it between our read and our write
                if gone:
                    dropped.append(key)
                else:
                    job = Job(key, kind or "", dict(payload or {}), cluster, attempts, received_at)
                    taken.append(job)
        return taken, dropped


def _done(now: datetime) -> dict[str, Any]:
    """A job's row once answered or given up: no lease, and no payload (its response URL)."""
    return {"done_at": now, "payload": None, "lease_until": None}


def _row(asked: _Asked, now: datetime) -> dict[str, Any]:
    row: dict[str, Any] = {"key": asked.key, "received_at": now}
    if asked.job is not None:
        row.update(
            kind=asked.job.kind,
            payload=asked.job.payload,
            owner=asked.job.owner,
            lease_until=now + asked.job.lease,
            attempts=1,
        )
    return row
