"""Off-request-path work: a bounded worker pool and a dedupe set for Slack retries.

Slack wants an HTTP answer within 3 seconds and retries events it thinks went unanswered
(header `X-Slack-Retry-Num`). Listeners therefore only parse and `ack()`; the triage runs here.
The pool is bounded twice: `workers` threads, and at most `max_pending` jobs waiting or
running, so a slow cluster turns into a polite "busy" reply instead of an unbounded backlog.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

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
