"""A few threads for one command's reads of the API server, run at the same time.

A command's lists are independent (nodes, the GPU stack's pods, the pods of forty nodes), and
each spends most of its time waiting on the API server: a handful in flight at once finish in
the time of the longest. The threads are daemons, started as work arrives: a command that
ends (its answer printed, or an error) does not wait for reads it no longer needs, as it
would for `concurrent.futures.ThreadPoolExecutor`'s threads, which the interpreter joins at
exit. Every request still answers to the command's deadline (`kube.transport.Deadline`).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from functools import partial
from typing import Any, TypeVar

T = TypeVar("T")
R = TypeVar("R")
IDLE = 2.0  # seconds a thread waits for more work before it ends
_Job = tuple[Future[Any], Callable[[], Any]] | None


class Workers:
    """At most `size` threads running submitted reads, oldest first."""

    def __init__(self, size: int) -> None:
        self.size = size
        self._jobs: queue.SimpleQueue[_Job] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._closed = False

    def submit(self, read: Callable[[], T]) -> Future[T]:
        """`read()` on one of the threads; its result (or exception) in the future."""
        done: Future[T] = Future()
        with self._lock:
            if self._closed:
                raise RuntimeError("workers closed")
            self._jobs.put((done, read))
            if self._threads < self.size:  # threads stay, waiting for more
                self._threads += 1
                threading.Thread(target=self._run, name="read", daemon=True).start()
        return done

    def map(self, read: Callable[[T], R], items: Sequence[T]) -> list[R]:
        """`read(item)` for every item, up to `size` at once; the results in order. The
        first failure is raised once every read has ended (none is left running behind)."""
        if len(items) <= 1:
            return [read(item) for item in items]
        futures = [self.submit(partial(read, item)) for item in items]
        for f in futures:
            f.exception()  # wait for all
        return [f.result() for f in futures]

    def _run(self) -> None:
        while True:
            try:
                job = self._jobs.get(timeout=IDLE)
            except queue.Empty:
                with self._lock:  # submit puts under this lock: nothing can be left behind
                    if self._jobs.empty():
                        self._threads -= 1
                        return
                continue
            if job is None:
                return
            done, read = job
            if not done.set_running_or_notify_cancel():
                continue
            try:
                done.set_result(read())
            except BaseException as e:  # handed to whoever waits for it
                done.set_exception(e)

    def close(self) -> None:
        """Let the threads end once the reads already submitted are done."""
        with self._lock:
            self._closed = True
            for _ in range(self._threads):
                self._jobs.put(None)
            self._threads = 0
