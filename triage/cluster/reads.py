"""What one triage read, so that a later sweep can tell whether its answer still holds.

The fleet view triages every stuck workload on every sweep; most answers do not change between
two sweeps. A `ReadLog` keeps, per key, what a triage saw: the objects it got and listed (by
identity: a watch-backed source replaces a changed object and never mutates one), the events
it was shown, and digests of the work it shared with other triages (the evaluation of every
node for pods of one shape, the GPU stack view). The reads that went into shared work are
set aside (`aside`): the digest stands for them, so a heartbeat on a node no answer depends on
does not make every answer stale.

A triage that depends on the clock (an autoscaler's silence, a node still joining, a pod bound
to a node) marks itself `volatile`: it is never reused.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from operator import is_
from typing import Any

Key = tuple[Any, ...]  # a tag, then what names the read


class ReadLog:
    __slots__ = ("_aside", "deps", "volatile")

    def __init__(self) -> None:
        self.deps: dict[Key, Any] = {}
        self.volatile = False
        self._aside = 0

    def note(self, key: Key, value: Any) -> None:
        """What the triage saw under `key` (the first sight counts: it is what it judged)."""
        if not self._aside and key not in self.deps:
            self.deps[key] = value

    @contextmanager
    def aside(self) -> Iterator[None]:
        """Reads inside are not this triage's: a digest noted outside stands for them."""
        self._aside += 1
        try:
            yield
        finally:
            self._aside -= 1


@dataclass
class SweepState:
    """What the triages of one sweep share, handed to each (`triage(..., sweep=)`): the work
    they share, as they all see one state of the cluster (the stack view, the evaluation of
    every node for pods of one shape, and the digests of both), and, while a triage runs in a
    sweep that keeps answers, the log of what it reads."""

    shared: dict[Hashable, Any] = field(default_factory=dict)
    log: ReadLog | None = None


class Failed:
    """A read that raised: equal to another failure with the same message."""

    __slots__ = ("message",)

    def __init__(self, message: str) -> None:
        self.message = message

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Failed) and other.message == self.message

    def __hash__(self) -> int:
        return hash(self.message)


# Tags of the keys a sweep's source notes for its reads, by how two sightings compare.
OBJECT = "get"  # one object: by identity
OBJECTS = "list"  # a list of objects: element by element, by identity
USAGE = "usage"  # node name -> NodeUsage: value by value, by identity
LABELS = "node-labels"  # a node's labels: by equality


def same(key: tuple[Any, ...], a: Any, b: Any) -> bool:
    """Whether two sightings under `key` show the same state. Objects compare by identity (a
    watch-backed source replaces what changed); digests and anything else by equality."""
    if a is b:
        return True
    if isinstance(a, Failed) or isinstance(b, Failed):
        return bool(a == b)
    tag = key[0]
    if tag == OBJECT:
        return False
    if tag == OBJECTS:
        return len(a) == len(b) and all(map(is_, a, b))
    if tag == USAGE:
        return len(a) == len(b) and all(b.get(k) is v for k, v in a.items())
    return bool(a == b)
