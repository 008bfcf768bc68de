"""Resolving what the user named: a pod, or a Job/Deployment/StatefulSet/ReplicaSet/DaemonSet
and its pods.

When no pod has the name, the workload's pods are found through ownerReferences; when the
workload created none, its pod template stands in for the pod (quota is checked against it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from triage.cluster.indexes import owned_pods
from triage.cluster.objects import Obj, meta, name_of, owner, pod_problem, template_labels
from triage.cluster.source import (
    ClusterSource,
    NotFoundError,
    ReadFailedError,
)
from triage.model import Layer
from triage.named import parse_target
from triage.names import InvalidNameError, validate_namespace
from triage.signals import Unknown

WORKLOAD_KINDS = ("Job", "Deployment", "StatefulSet", "ReplicaSet", "DaemonSet")
_PARENT = {"ReplicaSet": "Deployment"}


@dataclass
class Target:
    namespace: str
    name: str
    kind: str
    pod: Obj | None
    pods: list[Obj] = field(default_factory=list)
    workloads: list[Obj] = field(default_factory=list)  # owner chain, outermost first
    template: Obj | None = None
    # What resolving could not read: an owner it could not follow is the quota layer's (its
    # events, its queue) and the owner route's.
    unknowns: list[Unknown] = field(default_factory=list)

    @property
    def subject(self) -> Obj | None:
        """The pod-shaped object the layers judge: the pod, else the workload's template."""
        return self.pod or self.template


def _owned_by(obj: Obj, kind: str, name: str) -> bool:
    return any(
        r.get("kind") == kind and r.get("name") == name
        for r in meta(obj).get("ownerReferences") or []
    )


def _owner_chain(
    source: ClusterSource,
    namespace: str,
    obj: Obj,
    unknowns: list[Unknown],
    known: Mapping[tuple[str, str], Obj] | None = None,
) -> list[Obj]:
    """`obj`'s owners that exist, outermost first; those in `known` (read already, by kind
    and name) are not read again."""
    chain: list[Obj] = []
    current = obj
    for _ in range(3):
        ref = owner(current)
        if ref is None or ref[0] not in WORKLOAD_KINDS:
            break
        try:
            parent = (known or {}).get(ref) or source.get(ref[0], ref[1], namespace=namespace)
        except ReadFailedError as e:
            unknowns.append(Unknown(Layer.QUOTA, f"owner {ref[0]} {ref[1]} not read: {e}", e))
            break
        if parent is None:
            break
        chain.insert(0, parent)
        current = parent
    return chain


def _template(workload: Obj) -> Obj:
    tpl = (workload.get("spec") or {}).get("template") or {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{name_of(workload)}-<new>",
            "namespace": meta(workload).get("namespace"),
            "labels": template_labels(workload),
            "annotations": (tpl.get("metadata") or {}).get("annotations") or {},
        },
        "spec": tpl.get("spec") or {},
        "status": {"phase": "Pending"},
    }


def _pick(pods: list[Obj]) -> Obj | None:
    """The pod most worth explaining: a stuck one before a running one, oldest first (of
    two created in one second, the first by name: not the order a source read them in)."""
    if not pods:
        return None
    stuck = [p for p in pods if pod_problem(p) is not None]
    pool = stuck or pods
    return min(pool, key=lambda p: (str(meta(p).get("creationTimestamp", "")), name_of(p)))


def resolve(source: ClusterSource, *, namespace: str, name: str) -> Target:
    """`name` is a pod's or a workload's name (a pod first, then each workload kind), or
    `KIND/NAME` (`triage.named`: kubectl's kinds and short names) for that kind only."""
    validate_namespace(namespace)
    named = parse_target(name)
    if named.namespace is not None:
        raise InvalidNameError(f"give the namespace apart from the name: {name!r}")
    name, only = named.name, named.kind
    unknowns: list[Unknown] = []
    pod = source.get("Pod", name, namespace=namespace) if only in (None, "Pod") else None
    if pod is not None:
        chain = _owner_chain(source, namespace, pod, unknowns)
        return Target(namespace, name, "Pod", pod, [pod], chain, unknowns=unknowns)
    unread: list[ReadFailedError] = []
    kinds = WORKLOAD_KINDS if only is None else tuple(k for k in WORKLOAD_KINDS if k == only)
    for kind in kinds:
        try:
            workload = source.get(kind, name, namespace=namespace)
        except ReadFailedError as e:
            unread.append(e)
            continue
        if workload is None:
            continue
        chain = [*_owner_chain(source, namespace, workload, unknowns), workload]
        owners = {(kind, name)}
        sets: list[Obj] = []
        if kind == "Deployment":
            sets = [
                rs
                for rs in source.objects("ReplicaSet", namespace=namespace)
                if _owned_by(rs, "Deployment", name)
            ]
            owners |= {("ReplicaSet", name_of(rs)) for rs in sets}
        pods = owned_pods(source, namespace=namespace, owners=sorted(owners))
        picked = _pick(pods)
        if picked is not None:
            # Its owners as read for the workload (a finished Job is read from the API once).
            known = {(str(o.get("kind")), name_of(o)): o for o in [*chain, *sets]}
            chain = _owner_chain(source, namespace, picked, unknowns, known) or chain
        elif sets:
            # No pod: the newest ReplicaSet is the one creating them, and its FailedCreate
            # events are the only trace of what admission refused.
            chain.append(max(sets, key=lambda rs: str(meta(rs).get("creationTimestamp", ""))))
        return Target(
            namespace, name, kind, picked, pods, chain, _template(workload), unknowns=unknowns
        )
    try:
        ns_obj = source.get("Namespace", namespace)
    except ReadFailedError:
        ns_obj = {}
    if ns_obj is None:
        raise NotFoundError(f"namespace {namespace} not found")
    if unread:  # it may be one of the kinds that could not be read: not "not found"
        first = unread[0]
        raise first.about(
            f"no pod named {name} in namespace {namespace}, and it could not be looked up as a "
            f"workload: {first}"
        ) from first
    what = "pod or workload" if only is None else only
    raise NotFoundError(f"no {what} named {name} in namespace {namespace}")
