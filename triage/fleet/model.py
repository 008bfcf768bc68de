"""What the fleet view answers: stuck GPU workloads (`Member`) grouped by root cause (`Group`)
into one `Sweep`, and how a cause and a wait read in one line.

A group names its cause and the objects that block it (nodes, a pool, a ResourceQuota, a
ClusterQueue) but never a workload's name: members are listed apart, and a viewer who may see
only some namespaces gets the group with their members alone (`only`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from pydantic import Field

from triage.model import Frozen, Layer, OwnerRoute
from triage.vendors import NVIDIA

# How a cause reads in a group's title; codes not listed read as their own words.
CAUSE_TITLES = {
    "driver.node-not-ready": "GPU nodes NotReady",
    "driver.pod-failing": "{vendor} driver pods failing",
    "driver.pod-missing": "no driver pod on GPU nodes",
    "driver.toolkit-failing": "{vendor} container toolkit failing",
    "driver.validation-failed": "GPU Operator validation stuck",
    "driver.component-disabled": "driver switched off on GPU nodes",
    "driver.not-installed": "no GPU driver installed",
    "driver.upgrade-in-progress": "driver upgrade in progress",
    "driver.upgrade-failed": "{vendor} driver upgrade failed",
    "driver.cdi-spec-unresolvable": "CDI spec stale or missing",
    "driver.library-mismatch": "driver/library version mismatch",
    "driver.runtime-init-failed": "{vendor} container runtime cannot start",
    "device-plugin.not-registered": "device plugin not registered with kubelet",
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
    "device-plugin.admission-out-of": "kubelet counted fewer devices than the scheduler",
    "device-plugin.topology-affinity": "Topology Manager refused the pod",
    "driver.node-shutdown": "node shutting down",
    "scheduling.kubelet-rejected": "kubelet refused the placement",
    "scheduling.insufficient": "GPU pool full",
    "scheduling.cordoned": "GPU nodes cordoned",
    "scheduling.selector-mismatch": "no node matches the selector",
    "scheduling.untolerated-taint": "GPU nodes tainted, not tolerated",
    "scheduling.request-too-large": "request larger than any node",
    "scheduling.no-mig-profile": "no node offers the MIG profile",
    "scheduling.no-gpu-nodes": "no GPU nodes",
    "scheduling.no-nodes": "no nodes in the cluster",
    "scheduling.resource-not-offered": "requested resource offered by no node",
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
    "quota.limitrange-violated": "LimitRange refuses the pods",
    "quota.webhook-denied": "admission webhook refuses the pods",
    "quota.webhook-unavailable": "admission webhook unreachable",
    "scheduling.autoscaler-backoff": "node group in backoff",
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
    triaged: int = Field(
        default=0, description="members triaged by this sweep (0: all kept from the last one)"
    )

    def only(self, namespaces: Callable[[str], bool]) -> Group | None:
        """The group as a viewer who may see only some namespaces sees it: their members only
        (counts included), the platform cause as it is; None when none of it is theirs."""
        mine = [m for m in self.members if namespaces(m.namespace)]
        if not mine:
            return None
        return self.model_copy(update={**group_totals(mine), "triaged": 0})


class Sweep(Frozen):
    """Every stuck GPU workload in scope, grouped. `waiting` holds the stuck workloads that
    nothing blocks (a node on its way, victims being preempted, a scheduler catching up);
    `unknown` those a layer that could explain could not be judged for (a read failed);
    `unread` what the sweep itself could not read, and what that leaves out."""

    cluster: str
    generated_at: datetime
    groups: list[Group]
    waiting: list[Member] = Field(default_factory=list)
    unknown: list[Member] = Field(
        default_factory=list,
        description="stuck workloads that could not be judged: their headline says why",
    )
    unread: list[str] = Field(
        default_factory=list,
        description="reads that failed (the sweep's own and its triages'), and what each "
        "left out or unjudged",
    )
    listing_failed: bool = Field(
        default=False,
        description="a kind the search for stuck workloads reads could not be read: some may "
        "be missing",
    )
    errors: list[str] = Field(
        default_factory=list, description="workloads that could not be triaged"
    )
    triaged: int = Field(default=0, description="workloads triaged by this sweep")
    reused: int = Field(
        default=0, description="workloads whose answer was kept: nothing they depend on changed"
    )

    @property
    def workloads(self) -> int:
        return sum(g.workloads for g in self.groups)

    @property
    def partial(self) -> bool:
        """Whether stuck workloads may be missing or unjudged (the search could not read a
        kind, a workload could not be triaged or judged): a group no longer listed may still
        be there."""
        return self.listing_failed or bool(self.errors or self.unknown)

    @property
    def complete(self) -> bool:
        """Whether every read succeeded and every stuck workload was found and judged: only
        then does "nothing stuck" mean what it says."""
        return not (self.partial or self.unread)

    @property
    def gpus(self) -> int:
        return sum(g.gpus for g in self.groups)

    def only(self, namespaces: Callable[[str], bool]) -> Sweep:
        groups = [g for g in (g.only(namespaces) for g in self.groups) if g is not None]
        return self.model_copy(
            update={
                "groups": groups,
                "waiting": [m for m in self.waiting if namespaces(m.namespace)],
                "unknown": [m for m in self.unknown if namespaces(m.namespace)],
                # what failed may name other namespaces: its count only
                "unread": [f"{len(self.unread)} read(s) failed (an operator sees which)"]
                if self.unread
                else [],
                "errors": [],
                "triaged": 0,
                "reused": 0,
            }
        )


def group_totals(members: list[Member]) -> dict[str, Any]:
    members = sorted(members, key=lambda m: (-m.gpus, m.since or datetime.max.replace(tzinfo=UTC)))
    times = [m.since for m in members if m.since is not None]
    return {
        "members": members,
        "workloads": len(members),
        "gpus": sum(m.gpus for m in members),
        "oldest": min(times, default=None),
        "example": members[0].headline,
    }


def describe_cause(code: str, blocking: list[str], vendor: str | None = None) -> str:
    """One line naming the cause and what it is about, with no workload's name in it."""
    title = CAUSE_TITLES.get(code) or code.split(".", 1)[-1].replace("-", " ")
    what = title.replace("{vendor}", vendor or NVIDIA.name)
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
