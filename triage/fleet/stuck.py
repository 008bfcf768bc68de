"""Finding the stuck GPU workloads of a cluster, before any is triaged.

A workload is stuck when it asks for GPUs (extended resources or DRA claims) and does not run:
a pod Pending, gated or not starting on its node, or a Job/ReplicaSet/StatefulSet whose pods
were rejected or never created. Pods are looked for among the troubled ones only (an index a
cache keeps current), so a cluster of 150,000 running pods costs little.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from triage.cluster.events import parse_time
from triage.cluster.indexes import owned_pods, troubled_pods
from triage.cluster.objects import Obj, meta, name_of, ns_of, owner
from triage.cluster.quantities import gpu_requests, pod_requests, wants_gpu
from triage.cluster.source import ClusterSource, ReadFailedError


@dataclass(frozen=True, slots=True)
class Stuck:
    """A stuck GPU workload, as found (before its triage)."""

    namespace: str
    name: str
    kind: str
    pods: int
    gpus: int
    since: datetime | None


def _gpu_count(pod: Obj) -> int:
    counts = sum(gpu_requests(pod).values())
    return counts or len((pod.get("spec") or {}).get("resourceClaims") or [])


def _template(workload: Obj) -> Obj:
    return {"spec": ((workload.get("spec") or {}).get("template") or {}).get("spec") or {}}


def _finished(workload: Obj) -> bool:
    return any(
        c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
        for c in (workload.get("status") or {}).get("conditions") or []
    )


def _wanted(workload: Obj) -> int:
    spec = workload.get("spec") or {}
    if workload.get("kind") == "Job":
        return int(spec.get("parallelism", 1) or 0)
    return int(spec.get("replicas", 1) or 0)


def stuck_workloads(
    source: ClusterSource,
    namespaces: Iterable[str] | None = None,
    *,
    unread: list[str] | None = None,
) -> list[Stuck]:
    """Every stuck GPU workload in `namespaces` (None: all), one per workload, sorted.

    A pod owned by a ReplicaSet, Job or StatefulSet is reported under its workload (a
    ReplicaSet under its Deployment); a workload with no pod at all (quota rejected them, a
    queue suspends it) under its own name with its template's GPUs.

    The pods must be read; a workload kind that cannot be read is said in `unread` (with what
    it hides) when that list is given, and raised otherwise: its pods are then reported under
    their own names, and its workloads that have no pod are not found.
    """
    scopes: list[str | None] = [None] if namespaces is None else list(namespaces)
    found: dict[tuple[str, str], Stuck] = {}

    def read(kind: str, ns: str | None) -> list[Obj]:
        try:
            return source.objects(kind, namespace=ns)
        except ReadFailedError as e:
            if unread is None:
                raise
            line = f"{e}: {_HIDDEN[kind]}"
            if line not in unread:
                unread.append(line)
            return []

    for ns in scopes:
        replica_sets = read("ReplicaSet", ns)
        rs_parent = {
            name_of(rs): (ref[1] if (ref := owner(rs)) and ref[0] == "Deployment" else None)
            for rs in replica_sets
        }
        workloads = {kind: read(kind, ns) for kind in ("Job", "StatefulSet")}
        workloads["ReplicaSet"] = replica_sets
        # Owners that exist: a pod whose owner is gone (or unreadable) is reported as itself.
        owners = {(kind, ns_of(w), name_of(w)) for kind in ("Job", "StatefulSet")
                  for w in workloads[kind]}  # fmt: skip
        for pod in troubled_pods(source, namespace=ns):
            if not wants_gpu(pod, pod_requests(pod)):
                continue
            ref = owner(pod)
            kind, name = "Pod", name_of(pod)
            if ref is not None and ref[0] == "ReplicaSet" and ref[1] in rs_parent:
                parent = rs_parent[ref[1]]
                kind, name = ("Deployment", parent) if parent else ("ReplicaSet", ref[1])
            elif ref is not None and (ref[0], ns_of(pod), ref[1]) in owners:
                kind, name = ref
            _add(found, Stuck(ns_of(pod), name, kind, 1, _gpu_count(pod), _created(pod)))
        for kind in ("Job", "ReplicaSet", "StatefulSet"):
            for w in workloads[kind]:
                tpl = _template(w)
                if not wants_gpu(tpl, pod_requests(tpl)):
                    continue
                wanted = _wanted(w)
                if _finished(w) or (wanted == 0 and not _suspended(w)):
                    continue
                if owned_pods(source, namespace=ns_of(w), owners=[(kind, name_of(w))]):
                    continue  # its pods, if stuck, were counted above
                parent = rs_parent.get(name_of(w)) if kind == "ReplicaSet" else None
                pods = max(wanted, 1)
                _add(
                    found,
                    Stuck(ns_of(w), parent or name_of(w), "Deployment" if parent else kind,
                          pods, pods * _gpu_count(tpl), _created(w)),
                )  # fmt: skip
    return [found[k] for k in sorted(found)]


# What a workload kind that cannot be read leaves out of the sweep.
_HIDDEN = {
    kind: f"pods of {kind}s are listed under their own names, and {kind}s whose pods were "
    "never created (quota, a queue) are not listed"
    for kind in ("Job", "ReplicaSet", "StatefulSet")
}


def _suspended(workload: Obj) -> bool:
    return (workload.get("spec") or {}).get("suspend") is True


def _created(obj: Obj) -> datetime | None:
    return parse_time(meta(obj).get("creationTimestamp"))


def _add(found: dict[tuple[str, str], Stuck], item: Stuck) -> None:
    key = (item.namespace, item.name)
    old = found.get(key)
    if old is None:
        found[key] = item
        return
    since = min((t for t in (old.since, item.since) if t is not None), default=None)
    found[key] = Stuck(
        old.namespace, old.name, old.kind, old.pods + item.pods, old.gpus + item.gpus, since
    )
