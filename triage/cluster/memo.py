"""Remembering per-node work across triages while the objects it came from are unchanged.

A watch-backed cache replaces an object (a new dict) whenever it changes and never mutates
one in place, so "the same objects" is an identity test. A bot process keeps one memo per
cluster source; a one-shot CLI triage just gets a fresh one.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from operator import is_
from typing import Any, Generic, TypeVar

T = TypeVar("T")
K = TypeVar("K", bound=Hashable)


class IdentityMemo:
    """A bounded LRU of values keyed by a name and validated by the identity of their inputs."""

    def __init__(self, *, maxsize: int = 50_000) -> None:
        # key -> (the inputs, held: that keeps their ids from being reused; the value)
        self._data: Recent[Hashable, tuple[tuple[Any, ...], Any]] = Recent(maxsize)
        self._lock = threading.Lock()
        self._tables: dict[str, dict[Any, Any]] = {}

    def get(self, key: Hashable, deps: tuple[Any, ...], compute: Callable[[], T]) -> T:
        return self._get(key, deps, compute, is_)

    def get_lists(self, key: Hashable, lists: tuple[list[Any], ...], compute: Callable[[], T]) -> T:
        """`get` with inputs given as lists of objects: each list is the same as the held one
        when it is the very same list (a source hands out one list while its objects are
        unchanged: no object is compared) or holds the same objects in the same order."""
        return self._get(key, lists, compute, _same)

    def _get(
        self,
        key: Hashable,
        deps: tuple[Any, ...],
        compute: Callable[[], T],
        same: Callable[[Any, Any], bool],
    ) -> T:
        hit = self._data.get(key)
        if hit is not None and len(hit[0]) == len(deps) and all(map(same, hit[0], deps)):
            return hit[1]  # type: ignore[no-any-return]
        value = compute()
        self._data.put(key, (deps, value))
        return value

    def table(self, name: str, *, limit: int = 100_000) -> dict[Any, Any]:
        """A plain dict for a hot loop that checks identity itself (no lock, no LRU order).

        Emptied when it outgrows `limit` (a cluster far larger than any we serve, or churn).
        """
        with self._lock:
            table: dict[Any, Any] = self._tables.setdefault(name, {})
            if len(table) > limit:
                table.clear()
            return table

    def __len__(self) -> int:
        return len(self._data)


def _same(held: list[Any], now: list[Any]) -> bool:
    return held is now or (len(held) == len(now) and all(map(is_, held, now)))


class Recent(Generic[K, T]):
    """The `maxsize` values last used, by key (thread-safe): for values large enough that
    keeping every one ever made would cost more than making one again."""

    def __init__(self, maxsize: int) -> None:
        self._data: OrderedDict[K, T] = OrderedDict()
        self._lock = threading.Lock()
        self._maxsize = maxsize

    def get(self, key: K) -> T | None:
        with self._lock:
            found = self._data.get(key)
            if found is not None:
                self._data.move_to_end(key)
            return found

    def put(self, key: K, value: T) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self._maxsize:
                self._data.popitem(last=False)

    def __len__(self) -> int:
        return len(self._data)
