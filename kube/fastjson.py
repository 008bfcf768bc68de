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

from collections.abc import Callable
from typing import Any

import orjson

from triage.cluster.collector import paused as gc_paused

__all__ = ["gc_paused", "loads"]

loads: Callable[[bytes], Any] = orjson.loads
