"""Database calls made for a chat's request that must not hold it up.

The delivery record before an ack, and the reply claim before a command's first answer, are
worth having (they make one answer per command across replicas) but not worth waiting for:
a SQLite file locked by another process made the ack wait 15 s (Slack gives up at 3), and a
frozen PostgreSQL made it wait for the whole freeze. Each such call runs here, on threads of
its own, and its caller waits at most `deadline` seconds: past that it goes on without the
answer, and the call finishes (or fails) in the background. A call still queued when its
caller gave up is dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import TypeVar

from incidents.errors import Fault, StoreUnavailableError

T = TypeVar("T")


class DatabaseCalls:
    def __init__(self, *, deadline: float, threads: int) -> None:
        self.deadline = deadline
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="gpu-triage-db")

    def within(
        self, call: Callable[[], T], *, late: Callable[[Future[T]], None] | None = None
    ) -> T:
        """`call()`'s result, or `StoreUnavailableError` (fault: timeout) once `deadline`
        seconds have passed; `late` then gets the call's future when it ends after all."""
        try:
            future = self._executor.submit(call)
        except RuntimeError:  # shutting down
            raise StoreUnavailableError("the bot is stopping", fault=Fault.UNAVAILABLE) from None
        try:
            return future.result(timeout=self.deadline)
        except FutureTimeout:
            if not future.cancel() and late is not None:
                future.add_done_callback(late)
            raise StoreUnavailableError(
                f"the incident database did not answer within {self.deadline:g}s",
                fault=Fault.TIMEOUT,
            ) from None

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
