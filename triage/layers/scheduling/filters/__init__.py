"""The scheduler's filters that look past the node itself: host ports, volumes, topology spread
and pod (anti-)affinity, judged per node from the objects they read.

kube-scheduler runs NodePorts before NodeResourcesFit and VolumeRestrictions, NodeVolumeLimits,
VolumeBinding, VolumeZone, PodTopologySpread and InterPodAffinity after it; for one node the
first failing filter is its reason, as in the scheduler's FitError. Failures that hold on
every node are the plugins' PreFilter: they become pod-level signals. The filters are built
only for a pod that has such constraints (or when the scheduler reports existing pods'
anti-affinity), so an ordinary GPU pod keeps the placement fast path.

One module per plugin (`ports`, `volumes`, `spread`, `affinity`), each a `Filter` over the
shared `FilterView`; this module runs them in the scheduler's order.
"""

from __future__ import annotations

from triage.cluster.objects import Obj
from triage.layers.scheduling.filters.affinity import InterPodAffinity, required_terms
from triage.layers.scheduling.filters.ports import NodePorts, host_ports
from triage.layers.scheduling.filters.spread import TopologySpread, hard_constraints
from triage.layers.scheduling.filters.view import Filter, FilterView, Refusal, pods_on
from triage.layers.scheduling.filters.volumes import Volumes, claim_names
from triage.signals import Signal

__all__ = ["FilterView", "PodFilters", "Refusal", "needs_filters", "pods_on"]


def needs_filters(pod: Obj) -> bool:
    """Whether the pod carries any constraint these filters judge."""
    return bool(
        host_ports(pod)
        or claim_names(pod)
        or hard_constraints(pod)
        or required_terms(pod, "podAffinity")
        or required_terms(pod, "podAntiAffinity")
    )


class PodFilters:
    """The filters for one pod, over one view of the cluster."""

    def __init__(self, view: FilterView, *, existing_anti_affinity: bool = False) -> None:
        self.view = view
        self.before: tuple[Filter, ...] = (NodePorts(self.view),)
        self.after: tuple[Filter, ...] = (
            Volumes(self.view),
            TopologySpread(self.view),
            InterPodAffinity(self.view, existing=existing_anti_affinity),
        )

    def pod_level(self) -> list[Signal]:
        """Reasons that stop the pod on every node (the plugins' PreFilter)."""
        return [s for f in (*self.before, *self.after) for s in f.pre_filter()]

    def before_fit(self, node: str) -> Refusal | None:
        """The filters before NodeResourcesFit."""
        obj = self.view.nodes.get(node) or {}
        return next((r for f in self.before if (r := f.filter(node, obj)) is not None), None)

    def after_fit(self, node: str) -> Refusal | None:
        """The filters after NodeResourcesFit, in the scheduler's order."""
        obj = self.view.nodes.get(node)
        if obj is None:
            return None
        return next((r for f in self.after if (r := f.filter(node, obj)) is not None), None)
