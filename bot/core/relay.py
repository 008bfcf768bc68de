"""Replicas sharing the work through the incident database: each command is answered once,
by a replica serving its cluster, even when the replica that took it dies mid-triage.

No consensus of our own: the database's rows are the coordination (`incidents.deliveries`).

- A command is written with its delivery key, as a job leased to the replica that took it
  (one group-committed INSERT before the ack, which dedupes retries too). The relay renews
  the leases of the jobs it runs, and marks them done once answered.
- A replica asked about a cluster it does not serve, that another live replica serves
  (`replicas` rows, rewritten every few seconds), hands the job off: the row loses its owner
  and a replica serving that cluster claims it.
- Every replica polls for jobs nobody holds (lease lapsed, or handed off) in the clusters it
  serves, claims them (one conditional UPDATE wins) and replays them through the same path
  as a fresh command.
- Before its first chat write for a job a replica claims the job's reply; a replica that
  loses that claim (it was slow, not dead, and another answered) posts nothing.

The database may fail, and no command is lost to that. A job whose record missed the ack's
deadline (`bot.core.deadline`) is answered here anyway, and its record is retried every tick (as a
job while it runs, as a plain delivery once answered, so that nobody replays it). A reply claim
the database cannot make is answered anyway: while the database works, one replica answers a
command; while it does not, the replica that took the command does, and the reply says it was
not recorded. A read-only database is not asked at all.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from typing import Any

from bot.core.deadline import DatabaseCalls
from bot.core.ports import RelayStoreLike
from incidents.errors import Fault, IncidentStoreError
from incidents.values import Job, NewJob
from triage import SourceStatus

log = logging.getLogger(__name__)

HEARTBEAT = 5.0  # seconds between two rewrites of this replica's row (at most)
LIVE_BEATS = 4  # a replica not heard from for this many heartbeats is gone
# How long a command may wait for its answer by default: Slack's response URLs last 30 minutes
# (a chat's adapter passes its own).
MAX_AGE = timedelta(minutes=25)


def replica_id() -> str:
    """This process, for other replicas and for people: the pod's name (its hostname), the pid
    and a few random characters (a restarted process is a new replica)."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(2)}"[:128]


class Relay:
    def __init__(
        self,
        *,
        store: RelayStoreLike,
        served: Callable[[], Sequence[SourceStatus]],
        replay: Callable[[Job], None],
        room: Callable[[], bool] = lambda: True,
        owner: str | None = None,
        lease: float = 30.0,
        poll: float = 1.0,
        calls: DatabaseCalls | None = None,
        max_age: timedelta = MAX_AGE,
    ) -> None:
        self.owner = owner or replica_id()
        self.max_age = max_age  # past this nobody can use an answer (a reply link expired)
        self._calls = calls or DatabaseCalls(deadline=2.0, threads=2)
        self._store, self._served, self._replay, self._room = store, served, replay, room
        self.lease, self.poll = timedelta(seconds=lease), poll
        self.heartbeat = min(HEARTBEAT, lease / 3)
        self._started_at = datetime.now(UTC)
        self._lock = threading.Lock()
        self._held: dict[str, float] = {}  # key -> monotonic time our lease surely lasts to
        self._since: dict[str, float] = {}  # key -> monotonic time this replica took it
        self._finished: list[str] = []
        self._replies: dict[str, bool] = {}
        # Jobs whose record failed: key -> the job to record (None once answered: recorded
        # then as a plain delivery, so that no replica replays it).
        self._unrecorded: dict[str, NewJob | None] = {}
        self._faults: dict[str, Fault] = {}  # key -> why a reply could not be claimed
        self._others: dict[str, str] = {}  # cluster -> a live replica serving it (not us)
        self._remote: list[SourceStatus] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_beat = 0.0
        self._last_renew = 0.0

    # -- jobs this replica runs --------------------------------------------------------------
    def new_job(self, kind: str, payload: dict[str, Any]) -> NewJob:
        return NewJob(kind=kind, payload=payload, owner=self.owner, lease=self.lease)

    @property
    def read_only(self) -> bool:
        """The database takes no writes: this replica answers alone and records nothing."""
        return self._store.read_only is not None

    def hold(self, key: str, *, unrecorded: NewJob | None = None) -> None:
        """This replica runs job `key` from now on (it inserted or claimed it just now; or
        its record failed, and `unrecorded` is the job to record again)."""
        with self._lock:
            now = time.monotonic()
            self._held[key] = now + self.lease.total_seconds()
            self._since[key] = now
            if unrecorded is not None:
                self._unrecorded[key] = unrecorded

    def recorded(self, key: str) -> None:
        """The record of job `key` landed after all (late, or on a retry)."""
        with self._lock:
            self._unrecorded.pop(key, None)

    def done(self, key: str) -> None:
        """Job `key` was answered (or needs no answer): marked done at the next tick."""
        with self._lock:
            if self._held.pop(key, None) is not None:
                self._finished.append(key)
            if key in self._unrecorded:
                self._unrecorded[key] = None
            self._replies.pop(key, None)
            self._since.pop(key, None)
            self._faults.pop(key, None)

    def fault(self, key: str) -> Fault | None:
        """Why job `key`'s answer is not recorded, if it is not (its replies say so)."""
        with self._lock:
            return self._faults.get(key)

    def gate(self, key: str) -> Callable[[], bool]:
        """`may_reply` for job `key`: claims its reply once (within the deadline), then
        answers from memory. When the database cannot say, this replica answers."""

        def claim() -> bool:
            if self._store.read_only is not None:
                raise self._store.read_only
            return self._store.deliveries.claim_reply(key, owner=self.owner)

        def may_reply() -> bool:
            with self._lock:
                known = self._replies.get(key)
            if known is not None:
                return known
            try:
                mine = self._calls.within(claim)
            except IncidentStoreError as e:
                fault = getattr(e, "fault", Fault.UNAVAILABLE)
                mine = True
                with self._lock:
                    self._faults[key] = fault
                log.warning("command %s answered here without a record: %s", key, e)
            with self._lock:
                if key in self._held:
                    self._replies[key] = mine
            if not mine:
                log.info("job %s is answered by another replica", key)
            return mine

        return may_reply

    # -- clusters served elsewhere -----------------------------------------------------------
    def elsewhere(self, cluster: str) -> str | None:
        """A live replica other than this one serving `cluster` (by name), if any."""
        with self._lock:
            return self._others.get(cluster)

    def hand_off(self, key: str, cluster: str) -> bool:
        """Let a replica serving `cluster` answer job `key`; False when that failed (the
        caller answers as if nobody served it)."""
        try:
            if not self._store.deliveries.hand_off(key, owner=self.owner, cluster=cluster):
                return False
        except IncidentStoreError as e:
            log.warning("job %s not handed off to cluster %s: %s", key, cluster, e)
            return False
        with self._lock:
            self._held.pop(key, None)
        return True

    def remote(self) -> list[SourceStatus]:
        """The clusters other live replicas serve and this one does not, as they last said."""
        with self._lock:
            return list(self._remote)

    # -- the loop ----------------------------------------------------------------------------
    def start(self) -> Relay:
        try:
            if not self.read_only:
                self._beat()
        except IncidentStoreError as e:  # the loop tries again; the bot starts regardless
            log.warning("relay: %s", e)
        self._thread = threading.Thread(target=self._loop, name="gpu-triage-relay", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop polling, mark what was answered done, leave the replicas table. Jobs still
        running here keep their lease until it lapses, then another replica answers them."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5 + self.poll)
        self._calls.close()
        if self.read_only:
            return
        try:
            self._flush()
            self._store.replicas.leave(self.owner)
        except IncidentStoreError as e:
            log.warning("relay not closed cleanly: %s", e)

    def _loop(self) -> None:
        failing = ""  # an outage is logged when it starts, changes and ends, not every tick
        while not self._stop.wait(self.poll):
            try:
                self.tick()
            except IncidentStoreError as e:
                if str(e) != failing:
                    log.warning("relay: %s", e)
                failing = str(e)
                continue
            except Exception:
                log.exception("relay tick failed")
            if failing:
                log.warning("relay: the incident database answers again")
                failing = ""

    def tick(self) -> None:
        """One round: record what failed to be, heartbeat, renew leases, mark answered jobs
        done, claim free jobs. A read-only database is left alone."""
        if self.read_only:
            return
        self._record_again()
        now = time.monotonic()
        if now - self._last_beat >= self.heartbeat:
            self._beat()
        if now - self._last_renew >= self.lease.total_seconds() / 3:
            self._renew()
        self._flush()
        if self._room():
            self._claim()

    def _beat(self) -> None:
        self._last_beat = time.monotonic()
        statuses = list(self._served())
        self._store.replicas.beat(
            self.owner, started_at=self._started_at, clusters=[asdict(s) for s in statuses]
        )
        mine = {s.name for s in statuses}
        others: dict[str, str] = {}
        remote: dict[str, SourceStatus] = {}
        live = self._store.replicas.live(within=timedelta(seconds=self.heartbeat * LIVE_BEATS))
        for replica in live:
            if replica.id == self.owner:
                continue
            for raw in replica.clusters:
                status = _status(raw)
                if status is None or status.name in mine:
                    continue
                others.setdefault(status.name, replica.id)
                if status.name not in remote or status.state == "synced":
                    remote[status.name] = status
        with self._lock:
            self._others, self._remote = others, sorted(remote.values(), key=lambda s: s.name)

    def _record_again(self) -> None:
        """Retry the records that failed: a running job as a job (held by this replica), an
        answered one as a plain delivery. The first failure ends the round."""
        with self._lock:
            pending = list(self._unrecorded.items())
        for key, job in pending:
            self._store.deliveries.first_time(key, job)
            with self._lock:
                if key in self._unrecorded and self._unrecorded[key] is job:
                    del self._unrecorded[key]
            log.info("delivery %s recorded on a retry", key)

    def _renew(self) -> None:
        self._last_renew = time.monotonic()
        with self._lock:
            # A job held past the age nobody can answer any more: a handler that never said
            # it was done. Stop renewing it (nobody could use the answer).
            stuck = [
                k
                for k, t in self._since.items()
                if self._last_renew - t > self.max_age.total_seconds()
            ]
        for key in stuck:
            log.warning("job %s held for %s without an answer: given up", key, self.max_age)
            self.done(key)
        with self._lock:
            keys = [k for k in self._held if k not in self._unrecorded]
        if not keys:
            return
        held = self._store.deliveries.renew(keys, owner=self.owner, lease=self.lease)
        until = self._last_renew + self.lease.total_seconds()
        with self._lock:
            for key in keys:
                if key in held and key in self._held:
                    self._held[key] = until
                elif key in self._held:
                    log.warning("job %s was taken over by another replica", key)

    def _flush(self) -> None:
        with self._lock:
            finished, self._finished = self._finished, []
        try:
            self._store.deliveries.finish(finished)
        except IncidentStoreError:
            with self._lock:
                self._finished[:0] = finished  # next tick
            raise

    def _claim(self) -> None:
        served = [s.name for s in self._served()]
        jobs, dropped = self._store.deliveries.claim(
            owner=self.owner, clusters=served, lease=self.lease, max_age=self.max_age
        )
        for key in dropped:
            log.warning("job %s dropped: answered already, too old, or tried too often", key)
        for job in jobs:
            log.info("taking over job %s (attempt %d)", job.key, job.attempts)
            self.hold(job.key)
            try:
                self._replay(job)
            except Exception:
                log.exception("job %s could not be replayed", job.key)
                self.done(job.key)


def _status(raw: dict[str, Any]) -> SourceStatus | None:
    try:
        return SourceStatus(**raw)
    except TypeError:  # a row written by another version
        return None
