"""Keeping answers between sweeps: a workload is triaged again only when something it read
changed.

Each triage of a sweep runs with a `ReadLog`; its answer is kept with what it read. The next
sweep re-reads those keys (a dictionary lookup or an identity check per key on a watch-backed
cache, each key once per sweep however many workloads share it) and triages again only the
workloads whose reads differ. Shared work (the evaluation of every node for one pod shape, the
GPU stack view) is compared by digest: it is redone once per sweep, by the first workload of
that shape triaged again or on its own from the placement kept for it, and the workloads that
rest on it compare digests.

Never kept: answers that depend on the clock (`ReadLog.volatile`), workloads nothing blocks
(they are waiting for something in motion), and any answer older than `max_age`, so a
dependency the log does not see heals within minutes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from triage.assemble import Judged
from triage.cluster.reads import Key, ReadLog, same
from triage.fleet.source import SweepSource

# Keys whose value the sweep's own shared work sets (see `triage.layers.base.Context.depend`):
# they are known once a triage of this sweep computed that work.
SHARED = ("shape", "view")


@dataclass(slots=True)
class Kept:
    verdict: Judged
    deps: dict[Key, Any]
    at: datetime


class FleetMemo:
    """Answers of the last sweep of one cluster, with what each read. Used by one sweep at a
    time (the bot's watch loop)."""

    def __init__(self, *, max_age: timedelta = timedelta(minutes=10)) -> None:
        self.max_age = max_age
        self._kept: dict[tuple[str, str], Kept] = {}
        self._setup: tuple[Any, ...] | None = None
        # shared work by key, and what can redo it in the next sweep (a shape's placement)
        self.redo: dict[Key, Any] = {}

    def start(self, setup: tuple[Any, ...]) -> None:
        """Forget everything when the engine's configuration or playbook changed."""
        if self._setup is not None and setup != self._setup:
            self._kept.clear()
        self._setup = setup

    def keep(self, key: tuple[str, str], verdict: Judged, log: ReadLog, at: datetime) -> None:
        if log.volatile or verdict.failing_layer is None:
            self._kept.pop(key, None)
        else:
            self._kept[key] = Kept(verdict, log.deps, at)

    def finish(
        self,
        keys: set[tuple[str, str]],
        *,
        namespaces: list[str] | None,
        redo: dict[Key, Any],
    ) -> None:
        """After a sweep: drop the workloads of `namespaces` (None: all) no longer stuck, and
        keep what can redo the shared work the kept answers rest on."""
        scope = None if namespaces is None else set(namespaces)
        for gone in self._kept.keys() - keys:
            if scope is None or gone[0] in scope:
                del self._kept[gone]
        used = {k for kept in self._kept.values() for k in kept.deps if k[0] in SHARED}
        self.redo = {k: v for k, v in {**self.redo, **redo}.items() if k in used}

    def candidate(self, key: tuple[str, str], now: datetime) -> Kept | None:
        kept = self._kept.get(key)
        if kept is None or now - kept.at > self.max_age:
            return None
        return kept

    def __len__(self) -> int:
        return len(self._kept)


class Current:
    """What every key shows in this sweep, each read once. `redo(key)` redoes a piece of
    shared work so that its digest is known (it may not be able to)."""

    def __init__(self, source: SweepSource, redo: Callable[[Key], None]) -> None:
        self._source = source
        self._redo = redo
        self._seen: dict[Key, Any] = {}

    def holds(self, kept: Kept, *, shared: bool) -> bool | None:
        """Whether everything `kept` read still shows the same: True, False, or None when the
        digest of some shared work cannot be known (`shared=False` checks only the reads of
        the source, and says None for any shared key)."""
        unknown = False
        memo = self._source.state.shared
        for key, value in kept.deps.items():
            if key[0] in SHARED:
                if not shared:
                    unknown = True
                    continue
                if ("digest", key) not in memo:
                    self._redo(key)
                now = memo.get(("digest", key), _UNKNOWN)
                if now is _UNKNOWN:
                    unknown = True
                    continue
            else:
                now = self._seen.get(key, _UNKNOWN)
                if now is _UNKNOWN:
                    now = self._seen[key] = self._source.reread(key)
            if not same(key, value, now):
                return False
        return None if unknown else True


_UNKNOWN = object()
