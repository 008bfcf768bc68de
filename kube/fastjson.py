"""Parsing large list responses fast: orjson, and the cyclic GC paused while lists arrive.

A page of 500 pods is ~1.5 MB of JSON that becomes tens of thousands of dicts and strings.
CPython's cyclic collector runs repeatedly while those are allocated and rescans the growing
cache each time: that made a cold sync 2-4x slower in the benchmark. Parsed JSON holds no
reference cycles, so the collector stays off while any list is being read (across all pages
and all informers), and what was built meanwhile is then frozen (`gc.freeze()`, unless the
cache was made with `freeze_gc=False`): moved out of the collector's generations, so later
collections do not walk the whole cache again.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import orjson

loads: Callable[[bytes], Any] = orjson.loads

_lock = threading.Lock()
_holders = 0
_disabled_by_us = False
_freeze = False


@contextmanager
def gc_paused(*, freeze: bool = False) -> Iterator[None]:
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
