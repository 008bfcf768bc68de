"""The cyclic garbage collector paused around work that allocates much and makes no cycles.

CPython's cyclic collector runs after every few hundred allocations, and each full collection
walks every tracked object in the process: in a bot holding a 20,000-node cluster, hundreds of
thousands. Work that allocates many short-lived, acyclic objects (parsing list pages, a fleet
sweep triaging thousands of workloads) pays those walks for nothing. `paused` keeps the
collector off while any thread is inside; a holder building long-lived state asks for it to be
frozen on the way out (`gc.freeze()`: moved out of the collector's generations), so later
collections do not walk it again. Cycles made meanwhile are collected once the collector runs.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_holders = 0
_disabled_by_us = False
_freeze = False


@contextmanager
def paused(*, freeze: bool = False) -> Iterator[None]:
    """Pause the cyclic GC while any thread is inside; re-enable it when the last one leaves,
    first freezing what was allocated meanwhile if any holder asked to (`freeze`)."""
    global _holders, _disabled_by_us, _freeze
    with _lock:
        if _holders == 0 and gc.isenabled():
            gc.disable()
            _disabled_by_us = True
        _holders += 1
        _freeze = _freeze or freeze
    try:
        yield
    finally:
        with _lock:
            _holders -= 1
            if _holders == 0:
                if _freeze:
                    gc.freeze()
                _freeze = False
                if _disabled_by_us:
                    _disabled_by_us = False
                    gc.enable()
