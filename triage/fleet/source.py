"""The source one sweep reads through: one events list for every triage, work shared across
triages, and a log of what each triage read (so the next sweep can keep answers that still
hold)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Mapping, Sequence
from concurrent.futures import Future
from datetime import datetime
from typing import Any

from triage.cluster.events import by_subject
from triage.cluster.memo import IdentityMemo
from triage.cluster.objects import Obj, labels, meta
from triage.cluster.reads import LABELS, OBJECT, OBJECTS, USAGE, Failed, SweepState
from triage.cluster.source import ClusterSource, ReadFailedError, SourceError
from triage.cluster.usage import NodeUsage

EVENTS = "events"
INDEX = "index"


def event_version(event: Obj) -> tuple[Any, ...]:
    """What changes when an event does: its resourceVersion, or (in a snapshot without one)
    its counts and times."""
    m = meta(event)
    if m.get("resourceVersion"):
        return (m.get("uid") or m.get("name"), m["resourceVersion"])
    series = event.get("series") or {}
    return (
        m.get("name"),
        event.get("count"),
        event.get("lastTimestamp"),
        series.get("count"),
        series.get("lastObservedTime"),
        event.get("message"),
    )


class SweepSource:
    """A ClusterSource for one sweep: everything is read from `source`, except that events are
    listed once, cluster-wide, and served to every triage from that list. `state` is what the
    sweep's triages share (`SweepState`: give it to each triage); while its log is set, every
    read of the triage running is noted there (see `triage.cluster.reads`)."""

    def __init__(self, source: ClusterSource, state: SweepState | None = None) -> None:
        self._source = source
        self.state = state or SweepState()
        self._events: dict[tuple[str, str, str], list[Obj]] | None = None
        self._events_ahead: Future[list[Obj]] | None = None
        self.events_failed: ReadFailedError | None = None  # said to every triage, once read

    # --- what the source says of itself: the cluster's -------------------------------------

    @property
    def cluster_name(self) -> str:
        return self._source.cluster_name

    @property
    def as_of(self) -> datetime | None:
        return self._source.as_of

    def staleness_note(self) -> str | None:
        return self._source.staleness_note()

    def coverage_notes(self) -> list[str]:
        return self._source.coverage_notes()

    def wait_synced(self, timeout: float | None = None) -> bool:
        return self._source.wait_synced(timeout)

    @property
    def memo(self) -> IdentityMemo:
        return self._source.memo

    @property
    def default_namespace(self) -> str | None:
        return self._source.default_namespace

    # --- reads ---------------------------------------------------------------------------

    def _read(self, key: tuple[Any, ...], read: Callable[[], Any]) -> Any:
        log = self.state.log
        if log is None:
            return read()
        try:
            value = read()
        except SourceError as e:
            log.note(key, Failed(str(e)))
            raise
        log.note(key, value)
        return value

    def get(self, kind: str, name: str, *, namespace: str | None = None) -> Obj | None:
        if self.state.log is None:  # no key nor closure to make: a full sweep's many reads
            return self._source.get(kind, name, namespace=namespace)
        return self._read(  # type: ignore[no-any-return]
            (OBJECT, kind, namespace, name),
            lambda: self._source.get(kind, name, namespace=namespace),
        )

    def objects(self, kind: str, *, namespace: str | None = None) -> list[Obj]:
        if self.state.log is None:
            return self._source.objects(kind, namespace=namespace)
        return self._read(  # type: ignore[no-any-return]
            (OBJECTS, kind, namespace), lambda: self._source.objects(kind, namespace=namespace)
        )

    def indexed(self, kind: str, index: str, key: Hashable) -> list[Obj] | None:
        found = self._source.indexed(kind, index, key)
        if found is not None and self.state.log is not None:
            self.state.log.note((OBJECTS, INDEX, kind, index, key), found)
        return found

    def filed(self, kind: str, index: str, keys: Sequence[Hashable]) -> list[bool] | None:
        if self.state.log is not None:  # a triage's reads: each noted, as `indexed` notes it
            found = [self.indexed(kind, index, k) for k in keys]
            return None if None in found else [bool(f) for f in found]
        return self._source.filed(kind, index, keys)

    def unmatched(
        self, kind: str, index: str, other_kind: str, other_index: str
    ) -> list[Obj] | None:
        if self.state.log is not None:  # a triage's reads: the caller reads them, noted
            return None
        return self._source.unmatched(kind, index, other_kind, other_index)

    def count(self, kind: str, *, namespace: str | None = None) -> int | None:
        if self.state.log is not None:  # a triage's reads: the caller lists them, noted
            return None
        return self._source.count(kind, namespace=namespace)

    def node_usage(self) -> Mapping[str, NodeUsage]:
        return self._read((USAGE,), self._source.node_usage)  # type: ignore[no-any-return]

    def read_events_ahead(self) -> None:
        """Start listing the cluster's events now, on a thread of its own: the sweep found a
        workload to triage, and every triage reads them. The list (a request per 500
        events) is then read while the sweep goes on finding the others, not in the first
        triage. The first call only."""
        if self._events_ahead is not None or self._events is not None:
            return
        ahead: Future[list[Obj]] = Future()
        self._events_ahead = ahead

        def read() -> None:
            try:
                ahead.set_result(self._source.objects("Event"))
            except BaseException as e:  # raised to the triage that reads them, as if it read
                ahead.set_exception(e)  # (anything: a triage must never wait for a dead thread)

        threading.Thread(target=read, name="sweep-events", daemon=True).start()

    def events_for(self, *, namespace: str, kind: str, name: str) -> list[Obj]:
        if self.events_failed is not None:  # one failed list, not one per triage
            raise self.events_failed
        if self._events is None:
            ahead = self._events_ahead
            try:
                listed = self._source.objects("Event") if ahead is None else ahead.result()
                self._events = by_subject(listed)
            except ReadFailedError as e:
                self.events_failed = e
                raise
        found = list(self._events.get((namespace, kind, name), []))
        if self.state.log is not None:
            key = (EVENTS, namespace, kind, name)
            self.state.log.note(key, tuple(map(event_version, found)))
        return found

    def reread(self, key: tuple[Any, ...]) -> Any:
        """What `key` (a read noted by a triage of an earlier sweep) shows now. Called between
        triages, when no read log is set."""
        tag = key[0]
        try:
            if tag == OBJECT:
                _, kind, namespace, name = key
                return self._source.get(kind, name, namespace=namespace)
            if tag == OBJECTS and key[1] == INDEX:
                _, _, kind, index, index_key = key
                return self.indexed(kind, index, index_key)
            if tag == OBJECTS:
                _, kind, namespace = key
                return self._source.objects(kind, namespace=namespace)
            if tag == USAGE:
                return self._source.node_usage()
            if tag == LABELS:
                try:
                    node = self._source.get("Node", key[1])
                except ReadFailedError:
                    node = None
                return labels(node) if node else {}
            if tag == EVENTS:
                _, namespace, kind, name = key
                found = self.events_for(namespace=namespace, kind=kind, name=name)
                return tuple(map(event_version, found))
        except SourceError as e:
            return Failed(str(e))
        raise KeyError(key)
