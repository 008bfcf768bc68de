"""Finding the stuck workloads of a cluster, before any is triaged.

A workload is stuck when a pod of it does not run and `why-pending` would say why: a pod
Pending (unscheduled, gated, or bound and not starting), rejected by the kubelet at admission,
or on a node that is not Ready; or a Job/ReplicaSet/StatefulSet whose pods were never created
(quota, a queue, a suspended Job). Pods that ask for an accelerator or another device are
stuck whenever they are troubled (a container crashing in the vendor's runtime is the driver's
matter), and so are the accelerator stack's own pods (a crashing device plugin); any other pod
is not stuck for crashing while it runs, which no layer here explains. Pods are looked for among the troubled ones only (an index a cache keeps current),
and the pods of nodes that are not Ready, so a cluster of 150,000 running pods costs little.

A pod is listed under the nearest owner that exists: its Deployment, else its ReplicaSet, its
Job, StatefulSet or DaemonSet, else the pod itself; an owner that is gone or cannot be read
never hides a pod. A workload whose pods are stuck in different places (some waiting for a
node, some bound to a broken one) is one item per place, each triaged on its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import NamedTuple, TypeVar

from triage.cluster.events import parse_time
from triage.cluster.indexes import (
    BY_NAME,
    INDEXERS,
    POD_OWNER,
    WORKLOAD_OPEN,
    owners_with_pods,
    troubled_pods,
)
from triage.cluster.lazy import cached_property
from triage.cluster.objects import (
    OWNER_KINDS,
    Obj,
    condition_true,
    meta,
    name_of,
    ns_of,
    owner,
    pod_problem,
    wants_pods,
    workload_wanted,
)
from triage.cluster.quantities import gpu_requests, pod_requests, wants_gpu
from triage.cluster.source import ClusterSource, ReadFailedError
from triage.layers.bound import rejection
from triage.layers.stacks.components import pod_component

T = TypeVar("T")


class Stuck(NamedTuple):
    """A stuck workload (or the part of it stuck in one place), as found (before its triage).

    `target` is the name the sweep triages: the oldest pod stuck in that place (what
    `why-pending` says of each of them), or the workload's own when it has no pod. (A tuple:
    a sweep makes one per workload.)"""

    namespace: str
    name: str
    kind: str
    pods: int
    gpus: int
    since: datetime | None
    target: str = ""

    @property
    def key(self) -> tuple[str, str]:
        return self.namespace, self.target or self.name


def _gpu_count(pod: Obj) -> int:
    counts = sum(gpu_requests(pod).values())
    return counts or len((pod.get("spec") or {}).get("resourceClaims") or [])


def _template(workload: Obj) -> Obj:
    return {"spec": ((workload.get("spec") or {}).get("template") or {}).get("spec") or {}}


def _devices(pod: Obj) -> bool:
    """Whether the pod asks for an accelerator, another device (an extended resource) or a
    DRA claim."""
    requests = pod_requests(pod)
    return wants_gpu(pod, requests) or any("/" in r and "kubernetes.io/" not in r for r in requests)


def _stuck(pod: Obj, *, on_bad_node: bool) -> bool:
    """Whether a troubled pod is one `why-pending` may call blocked."""
    status = pod.get("status") or {}
    phase = status.get("phase")
    if phase == "Succeeded":
        return False
    if on_bad_node or phase == "Pending" or rejection(pod) is not None:
        return True
    return phase != "Failed" and (_devices(pod) or pod_component(pod) is not None)


def _place(pod: Obj) -> str:
    """Where a pod is stuck: waiting for a node, or on the node it is bound to."""
    node = (pod.get("spec") or {}).get("nodeName")
    return f"node {node}" if node else ""


class _Owners:
    """The owners that exist in one scope, and the nearest existing owner of a pod. Whether
    any of each kind exists is asked once, as the finding starts (an owner kind that cannot be
    read is said then); a kind's objects are listed only when needed, and never where the
    source counts them and files them by name (the cache: after a change, its list of every Job
    of a batch cluster is remade, 565,000 Jobs in 19-26 ms at 20,000 nodes)."""

    def __init__(self, source: ClusterSource, read: _Read, ns: str | None) -> None:
        self._source, self._read, self._ns = source, read, ns
        self._lists: dict[str, list[Obj]] = {}
        self._names: dict[str, set[tuple[str, str]]] = {}  # where the source has no BY_NAME
        self.held = {kind: self._held(kind) for kind in OWNER_KINDS}

    def _held(self, kind: str) -> bool:
        counted = self._read.count(kind, self._ns)
        return bool(self.listed(kind)) if counted is None else counted > 0

    def listed(self, kind: str) -> list[Obj]:
        found = self._lists.get(kind)
        if found is None:
            found = self._lists[kind] = self._read(kind, self._ns)
        return found

    @cached_property
    def rs_parent(self) -> dict[tuple[str, str], str]:
        """Each ReplicaSet's Deployment, by the ReplicaSet's namespace and name."""
        if not self.held["ReplicaSet"]:
            return {}
        return {
            (ns_of(rs), name_of(rs)): ref[1]
            for rs in self.listed("ReplicaSet")
            if (ref := owner(rs)) and ref[0] == "Deployment"
        }

    def exists(self, kind: str, ns: str, name: str) -> bool:
        """Whether a `kind` named `name` in `ns` (within the scope) is among those read: asked
        of the source's by-name index (the cache's store), so that a sweep does not walk
        every Job of a batch cluster to know their names."""
        if not self.held.get(kind):  # none in the scope, or unread: none known
            return False
        found = self._source.filed(kind, BY_NAME, [(ns, name)])
        if found is not None:
            return found[0]
        names = self._names.get(kind)
        if names is None:
            names = self._names[kind] = {(ns_of(w), name_of(w)) for w in self.listed(kind)}
        return (ns, name) in names

    def podless(self, kind: str, ns: str | None) -> list[Obj]:
        """The workloads of `kind` that want pods (`wants_pods`) and have none: when the scope
        is the cluster, those the source files as wanting pods (`WORKLOAD_OPEN`, kept by the
        watches) under a key no pod's owner reference files under (`unmatched`), else those
        read, each asked of the pod index. (At 20,000 nodes: 4 ms against 96 ms.)"""
        if not self.held[kind]:  # none in the scope, or unread: none known
            return []
        if ns is None and (kind, WORKLOAD_OPEN) in INDEXERS:
            found = self._source.unmatched(kind, WORKLOAD_OPEN, "Pod", POD_OWNER)
            if found is not None:
                return [w for w in found if wants_pods(w)]  # the index's odd values too
        wanting = [w for w in self.listed(kind) if wants_pods(w)]
        keys = [(ns_of(w), kind, name_of(w)) for w in wanting]
        has = owners_with_pods(self._source, keys)
        return [w for w, owns in zip(wanting, has, strict=True) if not owns]

    def of(self, pod: Obj) -> tuple[str, str]:
        ref, ns = owner(pod), ns_of(pod)
        if ref is None or not self.exists(ref[0], ns, ref[1]):
            return "Pod", name_of(pod)
        if ref[0] == "ReplicaSet":
            parent = self.rs_parent.get((ns, ref[1]))
            if parent and self.exists("Deployment", ns, parent):
                return "Deployment", parent
        return ref


class _Read:
    """Reads a kind for the finding; a kind that cannot be read is said in `unread` (with what
    it hides) when that list is given, and raised otherwise."""

    def __init__(self, source: ClusterSource, unread: list[str] | None) -> None:
        self.source, self.unread = source, unread

    def __call__(self, kind: str, ns: str | None) -> list[Obj]:
        return self._reading(kind, lambda: self.source.objects(kind, namespace=ns), [])

    def count(self, kind: str, ns: str | None) -> int | None:
        """How many the source holds (`ClusterSource.count`: None, it would list them); 0
        for a kind that cannot be read, said as a list that fails is."""
        unreadable: int | None = 0
        return self._reading(kind, lambda: self.source.count(kind, namespace=ns), unreadable)

    def _reading(self, kind: str, read: Callable[[], T], failed: T) -> T:
        try:
            return read()
        except ReadFailedError as e:
            if self.unread is None:
                raise
            line = f"{e}: {_HIDDEN.get(kind, 'its objects are not used')}"
            if line not in self.unread:
                self.unread.append(line)
            return failed


def stuck_workloads(
    source: ClusterSource,
    namespaces: Iterable[str] | None = None,
    *,
    unread: list[str] | None = None,
    found_one: Callable[[], None] | None = None,
) -> list[Stuck]:
    """Every stuck workload in `namespaces` (None: all), sorted; a workload stuck in several
    places (waiting for a node, on node X) once per place.

    The pods must be read; an owner kind that cannot be read is said in `unread` when that
    list is given, and raised otherwise: its pods are then reported under their own names, and
    its workloads that have no pod are not found. `found_one` is called as soon as stuck pods
    or podless workloads are found, and may be called again (a sweep starts reading what its
    triages will read, once).
    """
    scopes: list[str | None] = [None] if namespaces is None else list(namespaces)
    read = _Read(source, unread)
    bad_nodes = _not_ready_nodes(read)
    found: dict[tuple[str, str, str], Stuck] = {}
    for ns in scopes:
        owners = _Owners(source, read, ns)
        places: dict[tuple[str, str], dict[str, list[Obj]]] = {}
        stuck = [
            pod
            for pod in _candidates(source, ns, bad_nodes)
            if _stuck(pod, on_bad_node=(pod.get("spec") or {}).get("nodeName") in bad_nodes)
        ]
        if stuck and found_one is not None:
            found_one()
        for pod in stuck:
            kind, name = owners.of(pod)
            places.setdefault((kind, name), {}).setdefault(_place(pod), []).append(pod)
        for (kind, name), by_place in places.items():
            _add_places(found, kind, name, by_place)
        for kind in ("Job", "ReplicaSet", "StatefulSet"):
            podless = owners.podless(kind, ns)  # a workload's pods, if stuck, were counted above
            if podless and found_one is not None:
                found_one()
            for w in podless:
                _add_podless(found, owners, kind, w)
    return [found[k] for k in sorted(found)]


def _add_places(
    found: dict[tuple[str, str, str], Stuck], kind: str, name: str, by_place: dict[str, list[Obj]]
) -> None:
    """One item per place the workload's pods are stuck, triaged as its oldest pod there."""
    for pods in by_place.values():
        oldest = min(pods, key=_created_key)
        gpus = sum(_gpu_count(p) for p in pods)
        _add(found, Stuck(ns_of(oldest), name, kind, len(pods), gpus, _created(oldest),
                          name_of(oldest)))  # fmt: skip


def _add_podless(
    found: dict[tuple[str, str, str], Stuck], owners: _Owners, kind: str, w: Obj
) -> None:
    """A workload that wants pods and has none (quota rejected them, a queue suspends it)."""
    wanted = workload_wanted(w)
    parent = owners.rs_parent.get((ns_of(w), name_of(w))) if kind == "ReplicaSet" else None
    if parent and not owners.exists("Deployment", ns_of(w), parent):
        parent = None  # its Deployment is gone or unread: the ReplicaSet stands for itself
    tpl = _template(w)
    pods = max(wanted, 1)
    _add(found, Stuck(ns_of(w), parent or name_of(w), "Deployment" if parent else kind,
                      pods, pods * _gpu_count(tpl), _created(w)))  # fmt: skip


def _not_ready_nodes(read: _Read) -> frozenset[str]:
    """Nodes whose kubelet is not Ready: every pod on them is held by the node."""
    return frozenset(
        name_of(n) for n in read("Node", None) if condition_true(n, "Ready") is not True
    )


def _candidates(source: ClusterSource, ns: str | None, bad_nodes: frozenset[str]) -> list[Obj]:
    """The troubled pods of the scope, and the pods bound to nodes that are not Ready."""
    pods = list(troubled_pods(source, namespace=ns))
    if not bad_nodes:
        return pods
    seen = {(ns_of(p), name_of(p)) for p in pods}
    usage = source.node_usage()
    for node in sorted(bad_nodes):
        for ref in usage[node].pods if node in usage else ():
            pod_ns, _, pod_name = ref.partition("/")
            if (ns is not None and pod_ns != ns) or (pod_ns, pod_name) in seen:
                continue
            pod = source.get("Pod", pod_name, namespace=pod_ns)
            if pod is not None and pod_problem(pod) is None:
                pods.append(pod)
    return pods


# What a kind that cannot be read leaves out of the sweep.
_HIDDEN = {
    kind: f"pods of {kind}s are listed under their own names, and {kind}s whose pods were "
    "never created (quota, a queue) are not listed"
    for kind in ("Job", "ReplicaSet", "StatefulSet")
} | {
    "Deployment": "pods of Deployments are listed under their ReplicaSets",
    "DaemonSet": "pods of DaemonSets are listed under their own names",
    "Node": "pods on nodes that are not Ready are listed only when they are troubled",
}


def _created(obj: Obj) -> datetime | None:
    return parse_time(meta(obj).get("creationTimestamp"))


def _created_key(obj: Obj) -> tuple[str, str]:
    return str(meta(obj).get("creationTimestamp") or ""), name_of(obj)


def _add(found: dict[tuple[str, str, str], Stuck], item: Stuck) -> None:
    key = (item.namespace, item.name, item.target)
    old = found.get(key)
    if old is None:
        found[key] = item
        return
    since = min((t for t in (old.since, item.since) if t is not None), default=None)
    found[key] = Stuck(
        old.namespace, old.name, old.kind, old.pods + item.pods, old.gpus + item.gpus, since,
        old.target,
    )  # fmt: skip
