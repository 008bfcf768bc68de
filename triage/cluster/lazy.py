"""`cached_property` without Python 3.11's lock.

On 3.11 `functools.cached_property` takes one lock per property, shared by every instance
(removed in 3.12). A triage whose lazy read waits on the API (its pod's events) then holds
up every other triage that touches the same property, on any cluster: one slow API server
stalls the whole bot. Two threads computing the same value of one instance at once merely
compute it twice; these values are pure reads of a snapshot, so that is harmless.
"""

from __future__ import annotations

import functools
from typing import Any, Self, TypeVar, overload

T = TypeVar("T")
_MISSING = object()


class cached_property(functools.cached_property[T]):
    @overload
    def __get__(self, instance: None, owner: type[Any] | None = None) -> Self: ...

    @overload
    def __get__(self, instance: object, owner: type[Any] | None = None) -> T: ...

    def __get__(self, instance: object | None, owner: type[Any] | None = None) -> Self | T:
        if instance is None:
            return self
        cache = instance.__dict__
        value = cache.get(self.attrname, _MISSING)  # type: ignore[arg-type]
        if value is _MISSING:
            value = self.func(instance)
            cache[self.attrname] = value  # type: ignore[index]
        return value  # type: ignore[no-any-return]
