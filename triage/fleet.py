"""The fleet view: every stuck GPU workload in scope, triaged, and grouped by root cause.

A workload is stuck when it asks for GPUs (extended resources or DRA claims) and does not run:
a pod Pending, gated or not starting on its node, or a Job/Deployment/StatefulSet whose pods
were rejected or never created. Each is triaged by the engine as if a user had asked; the
reports are grouped by their cause: the same failing layer and signal, and the same blocking
objects (the same broken nodes, node pool, ResourceQuota, ClusterQueue, missing label). Groups
sort by GPUs waiting, so the cause that holds back the most GPUs comes first.

A sweep reads the cluster once: events are listed once for all the triages (`SweepSource`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import Field

from triage.cluster.events import by_subject, parse_time
from triage.cluster.objects import Obj, meta, name_of, ns_of, owner, pod_problem
from triage.cluster.quantities import gpu_requests, pod_requests
from triage.cluster.source import ClusterSource, NotFoundError, SourceError
from triage.cluster.usage import NodeUsage
from triage.config import EngineConfig
from triage.engine import triage
from triage.layers.scheduling.exclusions import wants_gpu
from triage.model import Frozen, Layer, OwnerRoute, TriageReport
from triage.playbooks import Playbook, load_playbook

# Labels that name a node's pool, after the playbook's own: a group of full nodes is named
# by its pool, not by the thousand nodes in it.
POOL_FALLBACK = ("nvidia.com/gpu.product", "node.kubernetes.io/instance-type")
# How a cause reads in a group's title; codes not listed read as their own words.
CAUSE_TITLES = {
    "driver.node-not-ready": "GPU nodes NotReady",
    "driver.pod-failing": "NVIDIA driver pods failing",
    "driver.pod-missing": "no driver pod on GPU nodes",
    "driver.toolkit-failing": "NVIDIA container toolkit failing",
    "driver.validation-failed": "GPU Operator validation stuck",
    "driver.component-disabled": "driver switched off on GPU nodes",
    "driver.not-installed": "no GPU driver installed",
    "driver.upgrade-in-progress": "driver upgrade in progress",
    "driver.mig-config-failed": "MIG reconfiguration failed",
    "driver.runtimeclass-missing": "RuntimeClass missing",
    "driver.container-start-failed": "GPU containers fail to start",
    "device-plugin.pod-failing": "device plugin pods failing",
    "device-plugin.pod-missing": "no device plugin pod on GPU nodes",
    "device-plugin.no-gpu-resource": "GPU nodes advertise no GPUs",
    "device-plugin.unhealthy-devices": "unhealthy GPUs",
    "device-plugin.component-disabled": "device plugin switched off",
    "device-plugin.not-installed": "no device plugin installed",
    "device-plugin.mig-reconfiguring": "MIG reconfiguration in progress",
    "device-plugin.mig-profile-missing": "MIG profile not offered",
    "device-plugin.admission-error": "GPU admission failed on the node",
    "scheduling.insufficient": "GPU pool full",
    "scheduling.cordoned": "GPU nodes cordoned",
    "scheduling.selector-mismatch": "no node matches the selector",
    "scheduling.untolerated-taint": "GPU nodes tainted, not tolerated",
    "scheduling.request-too-large": "request larger than any node",
    "scheduling.no-mig-profile": "no node offers the MIG profile",
    "scheduling.no-gpu-nodes": "no GPU nodes",
    "scheduling.gated": "scheduling gates not removed",
    "scheduling.autoscaler-max-size": "node group at its maximum size",
    "scheduling.scale-up-stalled": "scale-up stalled",
    "scheduling.karpenter-limits": "Karpenter NodePool at its limits",
    "scheduling.dra-devices-allocated": "DRA devices all allocated",
    "scheduling.dra-no-matching-device": "no DRA device matches the claims",
    "quota.resourcequota-exceeded": "over namespace quota",
    "quota.kueue-pending": "waiting for quota in Kueue",
    "quota.kueue-clusterqueue-inactive": "ClusterQueue stopped",
    "quota.kueue-localqueue-missing": "LocalQueue missing",
    "quota.kueue-evicted": "evicted by Kueue",
    "quota.job-suspended": "Job suspended",
    "quota.volcano-pending": "Volcano gang not admitted",
    "quota.volcano-queue-closed": "Volcano queue closed",
    "quota.priorityclass-missing": "PriorityClass missing",
}
MEMBERS_SHOWN = 10


class Member(Frozen):
    """One stuck workload of a group."""

    namespace: str
    name: str
    kind: str
    pods: int = Field(description="pods not running (for a workload that created none: wanted)")
    gpus: int = Field(description="GPUs (or GPU claims) those pods wait for")
    since: datetime | None = Field(default=None, description="when the oldest of them was made")
    headline: str


class Group(Frozen):
    """Stuck workloads that share one root cause."""

    key: str = Field(description="stable id of the cause: layer, signal and blocking objects")
    cluster: str
    layer: Layer
    code: str
    cause: str = Field(description="the cause, one line, naming no workload")
    blocking: list[str] = Field(default_factory=list, description="the objects that block them")
    owner: OwnerRoute | None = None
    workloads: int
    gpus: int
    oldest: datetime | None = None
    members: list[Member]
    example: str = Field(description="the first member's headline")

    def only(self, namespaces: Callable[[str], bool]) -> Group | None:
        """The group as a viewer who may see only some namespaces sees it: their members only
        (counts included), the platform cause as it is; None when none of it is theirs."""
        mine = [m for m in self.members if namespaces(m.namespace)]
        if not mine:
            return None
        return self.model_copy(update=_totals(mine))


class Sweep(Frozen):
    """Every stuck GPU workload in scope, grouped. `waiting` holds the stuck workloads that
    nothing blocks (a node on its way, victims being preempted, a scheduler catching up)."""

    cluster: str
    generated_at: datetime
    groups: list[Group]
    waiting: list[Member] = Field(default_factory=list)
    errors: list[str] = Field(
        default_factory=list, description="workloads that could not be triaged"
    )

    @property
    def workloads(self) -> int:
        return sum(g.workloads for g in self.groups)

    @property
    def gpus(self) -> int:
        return sum(g.gpus for g in self.groups)

    def only(self, namespaces: Callable[[str], bool]) -> Sweep:
        groups = [g for g in (g.only(namespaces) for g in self.groups) if g is not None]
        return self.model_copy(
            update={
                "groups": groups,
                "waiting": [m for m in self.waiting if namespaces(m.namespace)],
                "errors": [],
            }
        )


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


def stuck_workloads(source: ClusterSource, namespaces: Iterable[str] | None = None) -> list[Stuck]:
    """Every stuck GPU workload in `namespaces` (None: all), one per workload, sorted.

    A pod owned by a ReplicaSet, Job or StatefulSet is reported under its workload (a
    ReplicaSet under its Deployment); a workload with no pod at all (quota rejected them, a
    queue suspends it) under its own name with its template's GPUs.
    """
    scopes: list[str | None] = [None] if namespaces is None else list(namespaces)
    found: dict[tuple[str, str], Stuck] = {}
    for ns in scopes:
        rs_parent = {
            name_of(rs): (ref[1] if (ref := owner(rs)) and ref[0] == "Deployment" else None)
            for rs in source.objects("ReplicaSet", namespace=ns)
        }
        # Owners that exist: a pod whose owner is gone (or unreadable) is reported as itself.
        owners = {
            (kind, ns_of(w), name_of(w))
            for kind in ("Job", "StatefulSet")
            for w in source.objects(kind, namespace=ns)
        }
        with_pods: set[tuple[str, str, str]] = set()
        for pod in source.objects("Pod", namespace=ns):
            ref = owner(pod)
            if ref is not None:
                with_pods.add((ns_of(pod), ref[0], ref[1]))
            # Cheapest test first: most pods of a big cluster run fine.
            if pod_problem(pod, messages=False) is None or not wants_gpu(pod, pod_requests(pod)):
                continue
            if (pod.get("status") or {}).get("phase") == "Succeeded":
                continue
            kind, name = "Pod", name_of(pod)
            if ref is not None and ref[0] == "ReplicaSet" and ref[1] in rs_parent:
                parent = rs_parent[ref[1]]
                kind, name = ("Deployment", parent) if parent else ("ReplicaSet", ref[1])
            elif ref is not None and (ref[0], ns_of(pod), ref[1]) in owners:
                kind, name = ref
            _add(found, Stuck(ns_of(pod), name, kind, 1, _gpu_count(pod), _created(pod)))
        for kind in ("Job", "ReplicaSet", "StatefulSet"):
            for w in source.objects(kind, namespace=ns):
                tpl = _template(w)
                if (ns_of(w), kind, name_of(w)) in with_pods or not wants_gpu(
                    tpl, pod_requests(tpl)
                ):
                    continue
                wanted = _wanted(w)
                if _finished(w) or (wanted == 0 and not _suspended(w)):
                    continue
                parent = rs_parent.get(name_of(w)) if kind == "ReplicaSet" else None
                pods = max(wanted, 1)
                _add(
                    found,
                    Stuck(ns_of(w), parent or name_of(w), "Deployment" if parent else kind,
                          pods, pods * _gpu_count(tpl), _created(w)),
                )  # fmt: skip
    return [found[k] for k in sorted(found)]


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


class SweepSource:
    """A ClusterSource for one sweep: everything is read from `source`, except that events are
    listed once, cluster-wide, and served to every triage from that list; `sweep_memo` lets
    the layers share work across the sweep's triages."""

    def __init__(self, source: ClusterSource) -> None:
        self._source = source
        self._events: dict[tuple[str, str, str], list[Obj]] | None = None
        # Work the layers share across the sweep's triages (the stack view, node evaluations
        # of pods of one shape): they all see one state of the cluster.
        self.sweep_memo: dict[Hashable, Any] = {}

    def __getattr__(self, name: str) -> Any:  # as_of, staleness_note, memo, default_namespace
        return getattr(self._source, name)

    @property
    def cluster_name(self) -> str:
        return self._source.cluster_name

    def get(self, kind: str, name: str, *, namespace: str | None = None) -> Obj | None:
        return self._source.get(kind, name, namespace=namespace)

    def objects(self, kind: str, *, namespace: str | None = None) -> list[Obj]:
        return self._source.objects(kind, namespace=namespace)

    def node_usage(self) -> Mapping[str, NodeUsage]:
        return self._source.node_usage()

    def events_for(self, *, namespace: str, kind: str, name: str) -> list[Obj]:
        if self._events is None:
            self._events = by_subject(self._source.objects("Event"))
        return list(self._events.get((namespace, kind, name), []))


def sweep(
    source: ClusterSource,
    *,
    namespaces: Iterable[str] | None = None,
    config: EngineConfig | None = None,
    playbook: Playbook | None = None,
    now: datetime | None = None,
) -> Sweep:
    """Triage every stuck GPU workload in scope and group the answers by root cause."""
    playbook = playbook or load_playbook()
    shared = SweepSource(source)
    as_of = getattr(source, "as_of", None)
    stamp = now or (as_of if isinstance(as_of, datetime) else None) or datetime.now(UTC)
    pool_of = _pools(source, playbook.node_pools.labels)
    groups: dict[str, list[tuple[Member, TriageReport]]] = {}
    waiting: list[Member] = []
    errors: list[str] = []
    for item in stuck_workloads(source, namespaces):
        try:
            report = triage(
                shared,
                namespace=item.namespace,
                name=item.name,
                config=config,
                playbook=playbook,
                now=now,
            )
        except NotFoundError:
            continue  # gone between the listing and its triage
        except SourceError as e:
            errors.append(f"{item.namespace}/{item.name}: {e}")
            continue
        member = Member(
            namespace=item.namespace,
            name=item.name,
            kind=item.kind,
            pods=item.pods,
            gpus=item.gpus,
            since=item.since,
            headline=report.headline,
        )
        if report.failing_layer is None:
            waiting.append(member)
            continue
        groups.setdefault(_cause_key(report, pool_of), []).append((member, report))
    built = [
        _group(source.cluster_name, key, rows, pool_of, playbook) for key, rows in groups.items()
    ]
    built.sort(key=lambda g: (-g.gpus, -g.workloads, g.layer.rank, g.key))
    return Sweep(
        cluster=source.cluster_name,
        generated_at=stamp,
        groups=built,
        waiting=waiting,
        errors=errors,
    )


PoolOf = Callable[[str], str]


def _pools(source: ClusterSource, labels: Iterable[str]) -> PoolOf:
    keys = (*labels, *POOL_FALLBACK)
    index: dict[str, str] = {}

    def pool_of(node: str) -> str:
        if not index:
            for n in source.objects("Node"):
                lab = meta(n).get("labels") or {}
                index[name_of(n)] = next(
                    (f"{k}={lab[k]}" for k in keys if lab.get(k)), "unlabelled nodes"
                )
        return index.get(node, "unknown nodes")

    return pool_of


def _blocking(report: TriageReport, pool_of: PoolOf) -> list[str]:
    """The objects a cause is about, as its group key: the pools of the nodes where it blocks
    (pods differ in which nodes of a pool they may use, not in why: one driver crash across a
    pool is one cause), and the quota, queue, label or request the failing signals name."""
    cause = report.cause
    if cause is None:
        return []
    objects = list(cause.objects)
    if cause.nodes:
        pools = sorted({pool_of(n) for n in cause.nodes})
        return [*objects, *(f"pool {p}" for p in pools)]
    if cause.layer == Layer.QUOTA and not objects:
        return [f"namespace {report.pod.namespace}"]
    return objects


def _cause_key(report: TriageReport, pool_of: PoolOf) -> str:
    cause = report.cause
    code = cause.code if cause is not None else ""
    raw = "|".join([report.cluster, str(report.failing_layer), code, *_blocking(report, pool_of)])
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


def _totals(members: list[Member]) -> dict[str, Any]:
    members = sorted(members, key=lambda m: (-m.gpus, m.since or datetime.max.replace(tzinfo=UTC)))
    times = [m.since for m in members if m.since is not None]
    return {
        "members": members,
        "workloads": len(members),
        "gpus": sum(m.gpus for m in members),
        "oldest": min(times, default=None),
        "example": members[0].headline,
    }


def _group(
    cluster: str,
    key: str,
    rows: list[tuple[Member, TriageReport]],
    pool_of: PoolOf,
    playbook: Playbook,
) -> Group:
    report = rows[0][1]
    assert report.failing_layer is not None and report.cause is not None
    blocking = _blocking(report, pool_of)
    if report.failing_layer in (Layer.DRIVER, Layer.DEVICE_PLUGIN):
        # The broken nodes themselves are the platform's to fix: name every one.
        nodes = sorted({n for _, r in rows if r.cause is not None for n in r.cause.nodes})
        blocking += [f"node {n}" for n in nodes]
    owners = {r.owner for _, r in rows}
    # Members whose namespaces route to different teams: the cause is shared, so it goes to
    # the owner of the layer (or of the signal), not to one tenant's team.
    owner = (
        report.owner
        if len(owners) == 1
        else playbook.route(report.failing_layer, codes=[report.cause.code])
    )
    return Group(
        key=key,
        cluster=cluster,
        layer=report.failing_layer,
        code=report.cause.code,
        cause=describe_cause(report.cause.code, blocking),
        blocking=blocking,
        owner=owner,
        **_totals([m for m, _ in rows]),
    )


def describe_cause(code: str, blocking: list[str]) -> str:
    """One line naming the cause and what it is about, with no workload's name in it."""
    what = CAUSE_TITLES.get(code) or code.split(".", 1)[-1].replace("-", " ")
    if not blocking:
        return what
    nodes = [b.removeprefix("node ") for b in blocking if b.startswith("node ")]
    others = [b for b in blocking if not b.startswith("node ")]
    parts = list(others)
    if nodes:
        shown = ", ".join(nodes[:3]) + (f" and {len(nodes) - 3} more" if len(nodes) > 3 else "")
        parts.append(f"{len(nodes)} node(s): {shown}")
    return f"{what}: " + "; ".join(parts)


def waited(since: datetime | None, now: datetime) -> str:
    """A wait as people say it: 40s, 12m, 3h, 2d."""
    if since is None:
        return "?"
    seconds = max(0, int((now - since).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


__all__ = [
    "Group",
    "Member",
    "Stuck",
    "Sweep",
    "SweepSource",
    "describe_cause",
    "stuck_workloads",
    "sweep",
    "waited",
]
