"""Dicts as small as CPython makes them, for the cache's millions of small ones.

Every cached pod is at least three dicts of its own: the pod, its metadata and its owner
reference (what pods share is kept once: `kube.slim`). A dict of up to five keys costs 184
bytes (the keys table is its own), 304 bytes from six. The `__dict__` of an instance whose
class's instances all set the same keys in the same order shares one keys table with them
(PEP 412, key-sharing dictionaries) and holds only its values: 120 bytes for five keys, 152
for six (with its GC header), in CPython 3.11-3.13. `compact(keys, values)` makes such a
dict: a real `dict`, equal to `dict(zip(keys, values))`, that any code reads as one (and may
change: one that gains a key becomes an ordinary dict). At 150,000 pods that is 27 MB less.

One class per set of keys, up to `SHAPES` of them (a pod's metadata has a few usual sets;
others get ordinary dicts), and as many again for the label sets of pods (`compact_labels`:
their keys are not names, `app.kubernetes.io/name`, and a cluster's workloads have many
sets of them; a budget of their own, so that they never take the metadata's). An
interpreter that does not make such dicts smaller (checked once, at import) gets ordinary
dicts throughout.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterable
from keyword import iskeyword
from typing import Any

SHAPES = 64  # key sets given a class of their own
LABEL_SHAPES = 256  # and label sets (`compact_labels`)

Make = Callable[[Iterable[Any]], dict[str, Any]]
_new = object.__new__
_lock = threading.Lock()


def _maker(keys: tuple[str, ...]) -> Make:
    """Dicts of these keys, in this order, sharing one keys table: made by a function that
    sets them as attributes, in one statement when they are names (written out, as
    `dataclasses` and `namedtuple` write theirs: four times as fast as setting them in a
    loop), else one by one."""
    cls = type("_Keys", (), {"__module__": __name__})
    if keys and all(map(_named, keys)):  # (no keys: no statement to write)
        targets = "".join(f"o.{k}, " for k in keys)
        code = (
            f"def make(values):\n    o = new(cls)\n    {targets}= values\n    return o.__dict__\n"
        )
        scope: dict[str, Any] = {"new": _new, "cls": cls}
        exec(code, scope)
        make: Make = scope["make"]
    else:

        def make(values: Iterable[Any]) -> dict[str, Any]:
            o: Any = _new(cls)
            for k, v in zip(keys, values, strict=True):
                setattr(o, k, v)
            return o.__dict__  # type: ignore[no-any-return]

    # CPython gives a class's first instances room for keys to come, one slot less each
    # time (3.11: 30 slots, then 29, ...): make those now, so that every cached one fits.
    for _ in range(64):
        size = sys.getsizeof(make([None] * len(keys)))
        if size == sys.getsizeof(make([None] * len(keys))):
            break
    return make


def _named(key: str) -> bool:
    """Whether `key` can be an attribute set in code: a name, not a keyword, not private."""
    return key.isidentifier() and not iskeyword(key) and not key.startswith("_")


def _settable(key: Any) -> bool:
    """Whether `key` can be an instance's attribute of its own: a string that names nothing of
    its class (whose attributes all begin with an underscore)."""
    return type(key) is str and key != "" and not key.startswith("_")


def _smaller() -> bool:
    keys = ("kind", "apiVersion", "metadata", "spec", "status")
    made = _maker(keys)([None] * len(keys))
    return type(made) is dict and sys.getsizeof(made) < sys.getsizeof(dict.fromkeys(keys))


ENABLED = _smaller()


class _Shapes:
    """Makers of small dicts, one per set of keys, up to `limit` sets (then ordinary dicts)."""

    def __init__(self, limit: int, keys_ok: Callable[[Any], bool]) -> None:
        self._makers: dict[tuple[str, ...], Make] = {}
        self._limit, self._keys_ok = limit, keys_ok

    def make(self, keys: tuple[str, ...], values: Iterable[Any]) -> dict[str, Any]:
        """`dict(zip(keys, values))` (as many values as keys), as small as this interpreter
        makes it, when the keys are right for these makers and within their budget."""
        make = self._makers.get(keys)
        if make is None:
            makers = self._makers
            if not ENABLED or len(makers) >= self._limit or not all(map(self._keys_ok, keys)):
                return dict(zip(keys, values, strict=True))
            with _lock:
                make = makers.get(keys) or makers.setdefault(keys, _maker(keys))
        return make(values)


# Bound methods, not functions that call them: `compact` runs three times per pod.
# `compact`: keys that are not plain names (as an object's fields are) get an ordinary dict.
compact = _Shapes(SHAPES, _named).make
# `compact_labels`: keys of any text but a leading underscore, with a budget of their own.
compact_labels = _Shapes(LABEL_SHAPES, _settable).make


def compacted(d: dict[str, Any]) -> dict[str, Any]:
    """`d` (a dict with string keys), as small as this interpreter makes it."""
    return compact(tuple(d), d.values())
