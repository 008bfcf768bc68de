"""The one read interface the engine uses to see a cluster (`ClusterSource`), what it may say
of itself, and the kinds and errors that go with it.

Objects are plain JSON-shaped dicts exactly as the API server returns them (`kubectl get -o
json`), never client model objects: the snapshot reader and the live adapter both produce them
cheaply, and the engine reads only the fields it needs.

Beyond its reads, every source answers a few questions about itself, declared here and
answered by `SourceDefaults` for a source that has nothing special to say: when its state was
observed (`as_of`), why it may be behind (`staleness_note`), the indexes it keeps current
(`indexed`), what it lacks (`coverage_notes`), the per-node work remembered while its objects stay the same (`memo`), the
namespace its user works in (`default_namespace`) and whether its first read is done
(`wait_synced`). The engine asks; it never probes a source for what it might have.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, TypeVar

from triage.cluster.errors import (
    DeadlineExceededError,
    ForbiddenError,
    MalformedSnapshotError,
    NotFoundError,
    NotServedError,
    ReadFailedError,
    SourceError,
    UnauthorizedError,
    UnavailableError,
)
from triage.cluster.kinds import ALL_KINDS, KINDS, NAMED, ResourceType
from triage.cluster.lazy import cached_property
from triage.cluster.memo import IdentityMemo
from triage.cluster.objects import Obj
from triage.cluster.usage import NodeUsage

__all__ = [
    "ALL_KINDS",
    "KINDS",
    "NAMED",
    "ClusterSource",
    "DeadlineExceededError",
    "ForbiddenError",
    "MalformedSnapshotError",
    "NotFoundError",
    "NotServedError",
    "ReadFailedError",
    "ResourceType",
    "SourceDefaults",
    "SourceError",
    "SourceStatus",
    "UnauthorizedError",
    "UnavailableError",
    "key",
]


@dataclass(frozen=True)
class SourceStatus:
    """How current a source's view of its cluster is, for people choosing which to ask."""

    name: str
    state: str  # "synced", "syncing" (first lists not done), "stale" (a watch is down),
    # "down" (never synced: unreachable or refused), "snapshot" (read from a file)
    nodes: int
    pods: int
    detail: str  # one line: what is syncing or failing, empty when all is well
    watched: bool = True  # kept current and swept for alerts from the start


class Reads(Protocol):
    """Read-only access to one cluster.

    Methods raise `ForbiddenError` for a kind the credentials cannot read and other
    `ReadFailedError`s when a read fails. Kinds whose API is not installed (no Kueue, no
    Volcano, no GPU Operator CRD) return empty lists.
    """

    @property
    def cluster_name(self) -> str: ...

    def get(self, kind: str, name: str, *, namespace: str | None = None) -> Obj | None: ...

    def objects(self, kind: str, *, namespace: str | None = None) -> list[Obj]: ...

    def events_for(self, *, namespace: str, kind: str, name: str) -> list[Obj]:
        """Events whose involvedObject (or regarding) is the named object."""
        ...

    def node_usage(self) -> Mapping[str, NodeUsage]:
        """Requests of non-terminated pods, per node name."""
        ...


class Freshness(Protocol):
    """How current the source's view is."""

    @property
    def as_of(self) -> datetime | None:
        """When the state was observed, for a source that is not the cluster now (a
        snapshot); None: it is now."""
        ...

    def staleness_note(self) -> str | None:
        """One line for a report when the data may be behind the cluster, else None."""
        ...

    def wait_synced(self, timeout: float | None = None) -> bool:
        """Wait (at most `timeout` seconds) for the first read of every kind; whether done."""
        ...

    def coverage_notes(self) -> list[str]:
        """One line each for what every report must say the source lacks (a snapshot taken
        without some kinds: `triage.cluster.coverage`); empty when it lacks nothing."""
        ...


class Indexes(Protocol):
    """Indexes kept current as objects change (`triage.cluster.indexes`)."""

    def indexed(self, kind: str, index: str, key: Hashable) -> list[Obj] | None:
        """The objects filed under `key` in an index of `kind`; None: this source keeps no
        such index (the caller scans)."""
        ...

    def filed(self, kind: str, index: str, keys: Sequence[Hashable]) -> list[bool] | None:
        """For each of `keys`, whether `indexed` would file anything under it; None when
        `indexed` is None (this source keeps no such index)."""
        ...

    def unmatched(
        self, kind: str, index: str, other_kind: str, other_index: str
    ) -> list[Obj] | None:
        """The objects of `kind` filed in `index` under a key that nothing is filed under in
        `other_index` of `other_kind` (keys of the same form); None when this source does not
        keep both indexes."""
        ...

    def count(self, kind: str, *, namespace: str | None = None) -> int | None:
        """How many objects of `kind` (in `namespace`, or all) the source holds, without
        handing them out; raises as `objects` does. None: it would have to list them (the
        caller reads them itself)."""
        ...


class Context(Protocol):
    """What the source knows of the place it is used from."""

    @property
    def memo(self) -> IdentityMemo:
        """Per-node work remembered while the objects it was made from are the same."""
        ...

    @property
    def default_namespace(self) -> str | None:
        """The namespace a name without one means (the kubeconfig context's), if known."""
        ...


class ClusterSource(Reads, Freshness, Indexes, Context, Protocol):
    """A cluster as the engine reads it: its reads, and what it says of itself."""


class SourceDefaults:
    """What a source says of itself when it has nothing special to say: current (no
    `as_of`, never stale, always synced), no indexes, no default namespace, and a memo of its
    own."""

    default_namespace: str | None = None

    @property
    def as_of(self) -> datetime | None:
        return None

    def staleness_note(self) -> str | None:
        return None

    def wait_synced(self, timeout: float | None = None) -> bool:
        return True

    def coverage_notes(self) -> list[str]:
        return []

    def indexed(self, kind: str, index: str, key: Hashable) -> list[Obj] | None:
        return None

    def filed(self, kind: str, index: str, keys: Sequence[Hashable]) -> list[bool] | None:
        return None

    def unmatched(
        self, kind: str, index: str, other_kind: str, other_index: str
    ) -> list[Obj] | None:
        return None

    def count(self, kind: str, *, namespace: str | None = None) -> int | None:
        return None

    @cached_property
    def memo(self) -> IdentityMemo:
        return IdentityMemo()


def key(obj: Obj) -> tuple[str, str]:
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        meta = {}
    return (meta.get("namespace") or "", meta.get("name") or "")


Named = dict[str, dict[str, Obj]]  # objects by namespace ("" for a cluster's), then name
_V = TypeVar("_V")


def by_namespace(objs: Iterable[Obj]) -> Named:
    """`objs` by namespace, then name (as `key` names them); of two with one key, the last."""
    found: Named = {}
    for obj in objs:  # (as `filing` files one: inline, for every pod of a cluster)
        ns, name = key(obj)
        named = found.get(ns)
        if named is None:  # not setdefault: that would make a dict for every object
            named = found[ns] = {}
        named[name] = obj
    return found


def filed_at(filed: Named, namespace: str, name: str) -> Obj | None:
    """The object filed under `namespace` and `name` (by `by_namespace` or `filing`)."""
    return filed.get(namespace, _NOTHING_FILED).get(name)


_NOTHING_FILED: dict[str, Obj] = {}  # (never written to)


def filing(filed: Named, project: Callable[[Obj], Obj] | None, obj: Obj) -> Obj:
    """`obj` as `project` makes it (as it is without), filed in `filed` as `by_namespace`
    files it: a list's objects filed as they are read."""
    made = obj if project is None else project(obj)
    file_at(filed, *key(made), made)
    return made


def file_at(filed: dict[str, dict[str, _V]], namespace: str, name: str, value: _V) -> None:
    """Files `value` under `namespace`, then `name` (as `by_namespace` files an object)."""
    named = filed.get(namespace)
    if named is None:  # not setdefault: that would make a dict for every object
        named = filed[namespace] = {}
    named[name] = value
