"""A ClusterSource over objects held in memory: a snapshot, a test fixture, a cache's copy.

It keeps what a watch cache keeps (objects by kind and namespace, one list per kind handed
out until a change, indexes, the requests per node kept current pod by pod), so the engine
meets the same shapes from a file as from a live cluster.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from datetime import datetime

from triage.cluster.errors import NotServedError
from triage.cluster.events import by_subject
from triage.cluster.indexes import BY_NAME, INDEXERS, Index, kept
from triage.cluster.kinds import ALL_KINDS
from triage.cluster.lazy import cached_property
from triage.cluster.objects import Obj
from triage.cluster.source import SourceDefaults, by_namespace, key
from triage.cluster.usage import NodeUsage, UsageIndex


class MemorySource(SourceDefaults):
    """A ClusterSource over objects held in memory (a snapshot, a test fixture, a cache copy).

    `not_served` names the kinds it does not hold, with why (a snapshot taken without them):
    reading one raises NotServedError, so the layers that need it are unknown. `scope` names
    the namespaces it holds of some kinds (a snapshot of some namespaces): reading another
    one, or all, raises too. `notes` are what every report must say it lacks
    (`triage.cluster.coverage`)."""

    def __init__(
        self,
        objects: Iterable[Obj],
        *,
        cluster_name: str = "snapshot",
        not_served: Mapping[str, str] | None = None,
        scope: Mapping[str, frozenset[str]] | None = None,
        notes: Iterable[str] = (),
        observed: datetime | None = None,
    ) -> None:
        self._cluster_name = cluster_name
        self._observed = observed
        self.not_served = dict(not_served or {})
        self.scope = dict(scope or {})
        self._notes = list(notes)
        self._by_kind: dict[str, dict[tuple[str, str], Obj]] = {k: {} for k in ALL_KINDS}
        for obj in objects:
            kind = obj.get("kind")
            if kind in self._by_kind:
                self._by_kind[kind][key(obj)] = obj
        self._by_ns = {kind: by_namespace(objs.values()) for kind, objs in self._by_kind.items()}
        self._usage: UsageIndex | None = None
        self._usage_now: dict[str, NodeUsage] | None = None
        self._events: dict[tuple[str, str, str], list[Obj]] | None = None
        self._indexes: dict[tuple[str, str], Index] = {}
        self._lists: dict[tuple[str, str | None], list[Obj]] = {}  # as `Informer.items`

    def put(self, obj: Obj) -> None:
        """Add or replace one object, as a watch would: a new dict, the old one untouched."""
        kind, (ns, name) = str(obj.get("kind")), key(obj)
        self._change(kind, ns, name, obj)

    def remove(self, kind: str, name: str, *, namespace: str | None = None) -> None:
        self._change(kind, namespace or "", name, None)

    def _change(self, kind: str, ns: str, name: str, new: Obj | None) -> None:
        if kind not in self._by_kind:
            return
        old = self._by_kind[kind].pop((ns, name), None)
        self._by_ns[kind].get(ns, {}).pop(name, None)
        self._lists.pop((kind, ns), None)
        self._lists.pop((kind, None), None)
        if new is not None:
            self._by_kind[kind][(ns, name)] = new
            self._by_ns[kind].setdefault(ns, {})[name] = new
        for (indexed_kind, _), index in self._indexes.items():
            if indexed_kind == kind:
                index.update(old, new)
        if kind == "Pod" and self._usage is not None:
            self._usage.change(old, new)
            self._usage_now = None
        elif kind == "Event":
            self._events = None
        elif kind == "Node":
            self.__dict__.pop("as_of", None)

    @property
    def cluster_name(self) -> str:
        return self._cluster_name

    @cached_property
    def as_of(self) -> datetime | None:
        """When this state was observed: `observed` if given (a snapshot read slim keeps no
        heartbeat), else the newest node heartbeat (a snapshot's age)."""
        if self._observed is not None:
            return self._observed
        return newest_heartbeat(self._by_kind["Node"].values())

    def coverage_notes(self) -> list[str]:
        return list(self._notes)

    def _served(self, kind: str, verb: str, namespace: str | None) -> None:
        why = self.not_served.get(kind)
        held = self.scope.get(kind)
        if held is not None and namespace not in held and kind != "Event":
            why = (
                f"the snapshot holds {kind} objects of namespace(s) {', '.join(sorted(held))} only"
            )
        if why is not None:
            rt = ALL_KINDS[kind]
            resource = f"{rt.plural}.{rt.group}" if rt.group else rt.plural
            raise NotServedError(why, verb=verb, resource=resource, namespace=namespace)

    def get(self, kind: str, name: str, *, namespace: str | None = None) -> Obj | None:
        if self.not_served or self.scope:
            self._served(kind, "get", namespace)
        found = self._by_kind.get(kind, {}).get((namespace or "", name))
        # A snapshot taken without namespaces: a namespace exists if anything lives in it.
        if (
            found is None
            and kind == "Namespace"
            and not self._by_kind["Namespace"]
            and any(name in by_ns for by_ns in self._by_ns.values())
        ):
            return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        return found

    def objects(self, kind: str, *, namespace: str | None = None) -> list[Obj]:
        """One list per kind and namespace while its objects are unchanged, as a watch cache
        hands them out (`Informer.items`): a reader must not change it."""
        if self.not_served or self.scope:
            self._served(kind, "list", namespace)
        found = self._lists.get((kind, namespace))
        if found is None:
            if namespace is None:
                found = list(self._by_kind.get(kind, {}).values())
            else:
                found = list(self._by_ns.get(kind, {}).get(namespace, {}).values())
            self._lists[(kind, namespace)] = found
        return found

    def events_for(self, *, namespace: str, kind: str, name: str) -> list[Obj]:
        if self._events is None:
            self._events = by_subject(self._by_kind["Event"].values())
        return list(self._events.get((namespace, kind, name), []))

    def node_usage(self) -> Mapping[str, NodeUsage]:
        if self._usage is None:
            self._usage = UsageIndex()
            self._usage.replace(self._by_kind["Pod"].values())
        if self._usage_now is None:
            self._usage_now = self._usage.snapshot()
        return self._usage_now

    def indexed(self, kind: str, index: str, key: Hashable) -> list[Obj] | None:
        """The objects filed under `key` in an index of `triage.cluster.indexes`, built on
        first use (`BY_NAME`: the store itself); None for one it keeps no index for
        (`kept`): the caller scans."""
        if index == BY_NAME:
            found = self._by_kind[kind].get(key)  # type: ignore[call-overload]
            return [] if found is None else [found]
        if not kept(kind, index):
            return None
        return self._index(kind, index).get(key)

    def filed(self, kind: str, index: str, keys: Sequence[Hashable]) -> list[bool]:
        if index == BY_NAME:
            store = self._by_kind[kind]
            return [k in store for k in keys]
        return self._index(kind, index).filed(keys)

    def unmatched(self, kind: str, index: str, other_kind: str, other_index: str) -> list[Obj]:
        return self._index(kind, index).unmatched(self._index(other_kind, other_index))

    def _index(self, kind: str, index: str) -> Index:
        built = self._indexes.get((kind, index))
        if built is None:
            built = Index(INDEXERS[(kind, index)], self._by_kind[kind].values())
            self._indexes[(kind, index)] = built
        return built


def newest_heartbeat(nodes: Iterable[Obj]) -> datetime | None:
    """The newest heartbeat of `nodes`' conditions: when their state was last observed."""
    newest: datetime | None = None
    for node in nodes:
        for c in (node.get("status") or {}).get("conditions") or []:
            raw = c.get("lastHeartbeatTime")
            if not isinstance(raw, str):
                continue
            try:
                t = datetime.fromisoformat(raw.replace("Z", "+00:00"))
            except ValueError:
                continue
            if t.tzinfo is not None and (newest is None or t > newest):
                newest = t
    return newest
