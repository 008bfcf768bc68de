"""Off-request-path work: a bounded worker pool, identical work run once, and a dedupe set
for a chat's retries.

A chat wants its request answered at once (Slack: within 3 seconds) and retries one it thinks
went unanswered. Its adapter therefore only parses and acknowledges; the triage runs here.
The pool is bounded twice: `workers` threads, and at most `max_pending` jobs waiting or
running, so a slow cluster turns into a polite "busy" reply instead of an unbounded backlog.
Twenty people asking about one stuck job during an incident are one triage (`Flights`): they
wait for it without a slot, so the bound counts distinct work, not askers.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")

log = logging.getLogger(__name__)


class WorkerPool:
    """A ThreadPoolExecutor with a cap on queued + running jobs. Owned by the app; `shutdown()`."""

    def __init__(self, *, workers: int, max_pending: int) -> None:
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="gpu-triage")
        self._slots = threading.BoundedSemaphore(max_pending)
        self._closed = False

    def try_submit(self, job: Callable[[], None]) -> Future[None] | None:
        """Run `job` in the pool, or return None at once when the pool is full or closed."""
        if self._closed or not self._slots.acquire(blocking=False):
            return None

        def run() -> None:
            try:
                job()
            except Exception:
                log.exception("background job failed")
            finally:
                self._slots.release()

        try:
            return self._executor.submit(run)
        except RuntimeError:  # shut down between the check and the submit
            self._slots.release()
            return None

    @property
    def closed(self) -> bool:
        return self._closed

    def shutdown(self, *, wait: bool = True) -> None:
        self._closed = True
        self._executor.shutdown(wait=wait, cancel_futures=not wait)


class Busy(Exception):
    """The pool was full: the work did not run."""


@dataclass(frozen=True, slots=True)
class Done(Generic[T]):
    """How a piece of work ended: its result, or what it raised (`Busy` when it never ran)."""

    result: T | None = None
    error: Exception | None = None


class Flights:
    """Work in flight by key, run once. The first `join` of a key runs the work on the pool;
    joins of that key while it runs only add their `deliver`, with no slot and no thread.
    When the work ends every `deliver` gets its `Done`, on the worker thread, in join order.

    Work may name a `lane` (the bot: its cluster). At most `per_lane` pieces of one lane run
    at once; the lane's next pieces wait, holding no thread, and start as its running ones
    end. A cluster that answers slowly then holds only its share of the workers, and the
    other clusters (and every other command) keep being answered. At most `limit` distinct
    pieces are in flight in all; beyond that a join is `Busy` at once."""

    def __init__(
        self, pool: WorkerPool, *, per_lane: int | None = None, limit: int | None = None
    ) -> None:
        self._pool = pool
        self._per_lane, self._limit = per_lane, limit
        self._lock = threading.Lock()
        self._waiting: dict[Hashable, list[Callable[[Done[Any]], None]]] = {}
        self._running: dict[Hashable, int] = {}  # lane -> pieces on the pool
        # lane -> (key, run) of the pieces waiting for a lane's turn
        self._queued: dict[Hashable, deque[tuple[Hashable, Callable[[], None]]]] = {}

    def join(
        self,
        key: Hashable,
        work: Callable[[], T],
        deliver: Callable[[Done[T]], None],
        *,
        lane: Hashable = None,
    ) -> None:
        def run() -> None:
            try:
                done: Done[T] = Done(result=work())
            except Exception as e:
                done = Done(error=e)
            self._finish(key, done)
            self._next(lane)

        with self._lock:
            waiting = self._waiting.get(key)
            if waiting is not None:
                waiting.append(deliver)
                return
            if self._limit is not None and len(self._waiting) >= self._limit:
                start, full = False, True
            else:
                self._waiting[key] = [deliver]
                full = False
                start = self._per_lane is None or self._running.get(lane, 0) < self._per_lane
                if start:
                    self._running[lane] = self._running.get(lane, 0) + 1
                else:
                    self._queued.setdefault(lane, deque()).append((key, run))
        if full:
            deliver(Done(error=Busy()))
        elif start and self._pool.try_submit(run) is None:
            self._finish(key, Done(error=Busy()))
            self._next(lane)

    def _next(self, lane: Hashable) -> None:
        """A piece of `lane` ended: start the lane's next waiting one, if any (those the
        pool has no room for are `Busy`)."""
        while True:
            with self._lock:
                queued = self._queued.get(lane)
                if not queued:
                    left = self._running.pop(lane, 1) - 1
                    if left > 0:
                        self._running[lane] = left
                    return
                key, run = queued.popleft()
                if not queued:
                    del self._queued[lane]
            if self._pool.try_submit(run) is not None:
                return
            self._finish(key, Done(error=Busy()))

    def _finish(self, key: Hashable, done: Done[Any]) -> None:
        with self._lock:
            delivers = self._waiting.pop(key, [])
        for deliver in delivers:
            try:
                deliver(done)
            except Exception:
                log.exception("could not deliver a result")

    def __len__(self) -> int:
        with self._lock:
            return len(self._waiting)


class SeenSet:
    """Keys seen in the last `ttl` seconds, at most `size` of them (oldest dropped first)."""

    def __init__(
        self, *, ttl: float = 600.0, size: int = 10_000, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._ttl, self._size, self._clock = ttl, size, clock
        self._seen: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()

    def first_time(self, key: str) -> bool:
        """True the first time `key` is offered within the TTL; False for repeats."""
        now = self._clock()
        with self._lock:
            while self._seen:
                _oldest, at = next(iter(self._seen.items()))
                if now - at < self._ttl and len(self._seen) < self._size:
                    break
                self._seen.popitem(last=False)
            if key in self._seen:
                return False
            self._seen[key] = now
            return True
