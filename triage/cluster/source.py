"""The one read interface the engine uses to see a cluster, and the errors it may raise.

Objects are plain JSON-shaped dicts exactly as the API server returns them (`kubectl get -o
json`), never client model objects: the snapshot reader and the live adapter both produce them
cheaply, and the engine reads only the fields it needs.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from triage.cluster.events import by_subject
from triage.cluster.indexes import INDEXERS, Index
from triage.cluster.lazy import cached_property
from triage.cluster.memo import IdentityMemo
from triage.cluster.objects import Obj
from triage.cluster.usage import NodeUsage, UsageIndex


@dataclass(frozen=True)
class ResourceType:
    """Where a kind lives in the API. The live adapter uses it; the snapshot reader keys on kind."""

    kind: str
    group: str
    version: str
    plural: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


def _rt(kind: str, api: str, plural: str, *, namespaced: bool = True) -> ResourceType:
    group, _, version = api.rpartition("/")
    return ResourceType(kind, group, version, plural, namespaced)


# Every kind the engine reads. Anything else in a snapshot is ignored.
KINDS: dict[str, ResourceType] = {
    rt.kind: rt
    for rt in (
        _rt("Namespace", "v1", "namespaces", namespaced=False),
        _rt("Node", "v1", "nodes", namespaced=False),
        _rt("Pod", "v1", "pods"),
        _rt("Event", "v1", "events"),
        _rt("ResourceQuota", "v1", "resourcequotas"),
        _rt("PersistentVolumeClaim", "v1", "persistentvolumeclaims"),
        _rt("PersistentVolume", "v1", "persistentvolumes", namespaced=False),
        _rt("StorageClass", "storage.k8s.io/v1", "storageclasses", namespaced=False),
        _rt("CSINode", "storage.k8s.io/v1", "csinodes", namespaced=False),
        _rt("DaemonSet", "apps/v1", "daemonsets"),
        _rt("Deployment", "apps/v1", "deployments"),
        _rt("ReplicaSet", "apps/v1", "replicasets"),
        _rt("StatefulSet", "apps/v1", "statefulsets"),
        _rt("Job", "batch/v1", "jobs"),
        _rt("RuntimeClass", "node.k8s.io/v1", "runtimeclasses", namespaced=False),
        _rt("PriorityClass", "scheduling.k8s.io/v1", "priorityclasses", namespaced=False),
        _rt("ClusterPolicy", "nvidia.com/v1", "clusterpolicies", namespaced=False),
        _rt("Workload", "kueue.x-k8s.io/v1beta1", "workloads"),
        _rt("LocalQueue", "kueue.x-k8s.io/v1beta1", "localqueues"),
        _rt("ClusterQueue", "kueue.x-k8s.io/v1beta1", "clusterqueues", namespaced=False),
        _rt("ResourceClaim", "resource.k8s.io/v1", "resourceclaims"),
        _rt("ResourceClaimTemplate", "resource.k8s.io/v1", "resourceclaimtemplates"),
        _rt("ResourceSlice", "resource.k8s.io/v1", "resourceslices", namespaced=False),
        _rt("DeviceClass", "resource.k8s.io/v1", "deviceclasses", namespaced=False),
        _rt("NodePool", "karpenter.sh/v1", "nodepools", namespaced=False),
        _rt("NodeClaim", "karpenter.sh/v1", "nodeclaims", namespaced=False),
        _rt("PodGroup", "scheduling.volcano.sh/v1beta1", "podgroups"),
        _rt("Queue", "scheduling.volcano.sh/v1beta1", "queues", namespaced=False),
    )
}


# Kinds read one named object at a time, never listed or watched: the RBAC grants `get` on
# exactly these names (deploy/helm templates/role-named-reads.yaml).
NAMED: dict[str, tuple[ResourceType, str, tuple[str, ...]]] = {
    "ConfigMap": (
        _rt("ConfigMap", "v1", "configmaps"),
        "kube-system",
        ("cluster-autoscaler-status",),
    ),
}
ALL_KINDS: dict[str, ResourceType] = {**KINDS, **{k: v[0] for k, v in NAMED.items()}}


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


class SourceError(Exception):
    """Base of every error a cluster source raises. `str(e)` is a one-line user-facing message."""

    permanent: bool = True


class NotFoundError(SourceError):
    """The object (or namespace) does not exist."""


class ReadFailedError(SourceError):
    """One read could not be made. A triage that meets it says what it could not judge (the
    layers that needed the read become unknown) instead of judging on an empty list.

    `fault` names the kind of failure for people and scripts; `verb`, `resource` and
    `namespace` name the read (empty when the failure is not about one resource)."""

    fault = "unavailable"

    def __init__(
        self,
        message: str,
        *,
        verb: str = "",
        resource: str = "",
        namespace: str | None = None,
    ) -> None:
        self.verb, self.resource, self.namespace = verb, resource, namespace
        super().__init__(message)

    @property
    def grant(self) -> str | None:
        """The RBAC grant that would let the read through, for a refused read."""
        return None

    def about(self, message: str) -> ReadFailedError:
        """The same failure, told in another sentence."""
        other = ReadFailedError(
            message, verb=self.verb, resource=self.resource, namespace=self.namespace
        )
        other.fault = self.fault
        return other


class ForbiddenError(ReadFailedError):
    """The credentials may not read this. Carries what to grant."""

    fault = "forbidden"

    def __init__(self, *, verb: str, resource: str, namespace: str | None = None) -> None:
        where = f" in namespace {namespace}" if namespace else " at cluster scope"
        super().__init__(
            f"cannot {verb} {resource}{where}: grant {verb} on {resource}"
            + (f" in {namespace}" if namespace else ""),
            verb=verb,
            resource=resource,
            namespace=namespace,
        )

    @property
    def grant(self) -> str | None:
        return f"{self.verb} on {self.resource}" + (
            f" in {self.namespace}" if self.namespace else " at cluster scope"
        )


class UnauthorizedError(ReadFailedError):
    """401: the server rejected the credentials (expired token, wrong certificate)."""

    fault = "unauthorized"

    def __init__(
        self, server: str, *, verb: str = "", resource: str = "", namespace: str | None = None
    ) -> None:
        self.server = server
        super().__init__(
            f"the Kubernetes API at {server} rejected the credentials (401 Unauthorized)"
            + (f" to {verb} {resource}" if verb and resource else "")
            + ": refresh the kubeconfig token or certificate",
            verb=verb,
            resource=resource,
            namespace=namespace,
        )


class UnavailableError(ReadFailedError):
    """The cluster could not be reached, answered with a server error, or too slowly.
    Worth retrying."""

    permanent = False


class DeadlineExceededError(SourceError):
    """The command's overall deadline passed. Not a failed read of its own: every read after
    it would fail too, so the command ends here (no layer check catches it) instead of
    judging on what it could not read."""

    permanent = False


class NotServedError(ReadFailedError):
    """The source does not hold this kind: a snapshot taken without it, or with objects of an
    API version this engine does not read."""

    fault = "not-in-snapshot"


class MalformedSnapshotError(SourceError):
    """A snapshot file could not be read as Kubernetes objects."""


class ClusterSource(Protocol):
    """Read-only access to one cluster. Implemented by snapshots and by the live adapter.

    Methods raise `ForbiddenError` for a kind the credentials cannot read and `UnavailableError`
    when the cluster cannot be reached. Kinds whose API is not installed (no Kueue, no Volcano,
    no GPU Operator CRD) return empty lists.
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


def key(obj: Obj) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return (meta.get("namespace") or "", meta.get("name") or "")


class MemorySource:
    """A ClusterSource over objects held in memory (a snapshot, a test fixture, a cache copy).

    `not_served` names the kinds it does not hold, with why (a snapshot taken without them):
    reading one raises NotServedError, so the layers that need it are unknown."""

    def __init__(
        self,
        objects: Iterable[Obj],
        *,
        cluster_name: str = "snapshot",
        not_served: Mapping[str, str] | None = None,
    ) -> None:
        self._cluster_name = cluster_name
        self.not_served = dict(not_served or {})
        self._by_kind: dict[str, dict[tuple[str, str], Obj]] = {k: {} for k in ALL_KINDS}
        for obj in objects:
            kind = obj.get("kind")
            if kind in self._by_kind:
                self._by_kind[kind][key(obj)] = obj
        self._by_ns: dict[str, dict[str, dict[str, Obj]]] = {k: {} for k in ALL_KINDS}
        for kind, objs in self._by_kind.items():
            for (ns, name), obj in objs.items():
                self._by_ns[kind].setdefault(ns, {})[name] = obj
        self._usage: UsageIndex | None = None
        self._usage_now: dict[str, NodeUsage] | None = None
        self._events: dict[tuple[str, str, str], list[Obj]] | None = None
        self._indexes: dict[tuple[str, str], Index] = {}
        self._lists: dict[tuple[str, str | None], list[Obj]] = {}  # as `Informer.items`
        self.memo = IdentityMemo()

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
        """When this state was observed: the newest node heartbeat (a snapshot's age)."""
        newest: datetime | None = None
        for node in self._by_kind["Node"].values():
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

    def _served(self, kind: str, verb: str, namespace: str | None) -> None:
        why = self.not_served.get(kind)
        if why is not None:
            rt = ALL_KINDS[kind]
            resource = f"{rt.plural}.{rt.group}" if rt.group else rt.plural
            raise NotServedError(why, verb=verb, resource=resource, namespace=namespace)

    def get(self, kind: str, name: str, *, namespace: str | None = None) -> Obj | None:
        if self.not_served:
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
        if self.not_served:
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

    def indexed(self, kind: str, index: str, key: Hashable) -> list[Obj]:
        """The objects filed under `key` in an index of `triage.cluster.indexes`, built on
        first use."""
        built = self._indexes.get((kind, index))
        if built is None:
            built = Index(INDEXERS[(kind, index)], self._by_kind[kind].values())
            self._indexes[(kind, index)] = built
        return built.get(key)
