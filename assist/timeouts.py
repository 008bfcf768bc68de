"""Run a call with a wall-clock limit, on a daemon thread that is abandoned if it overruns.

Python cannot kill a thread: a model or tool call that overruns keeps running in the
background until it returns, but nobody waits for it and its result is discarded. The threads
are daemons, so a stuck provider call never keeps the process alive at exit.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class CallTimeout(Exception):
    """The call did not finish within its limit."""


def call_with_timeout(fn: Callable[[], T], *, timeout: float, name: str = "call") -> T:
    """`fn()`'s result, its exception re-raised, or `CallTimeout` after `timeout` seconds."""
    box: dict[str, object] = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as e:
            box["error"] = e

    thread = threading.Thread(target=run, name=f"assist-{name}", daemon=True)
    thread.start()
    thread.join(max(0.0, timeout))
    if thread.is_alive():
        raise CallTimeout(f"{name} took longer than {timeout:g}s")
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]  # type: ignore[return-value]
