"""Every scheduler filter the engine models, in the order it runs them, and every table that
depends on them.

The order is the engine's, close to kube-scheduler's: whether the pod could ever use a node
(NodeName, the accelerator at all, NodeAffinity, TaintToleration, then the node's size), what
stops it there now before the fit (NodeUnschedulable, NodePorts, DynamicResources), the fit
itself (NodeResourcesFit), and the filters after it (the volume plugins, PodTopologySpread,
InterPodAffinity). A new filter is a module declaring its `PLUGIN` (see `framework`) and one
line here.
"""

from __future__ import annotations

from types import MappingProxyType

from triage.cluster.objects import Obj, PerSpec, name_of
from triage.layers.scheduling import dra
from triage.layers.scheduling.filters import (
    affinity,
    gpu_node,
    node_affinity,
    node_name,
    ports,
    resources_fit,
    spread,
    taints,
    unschedulable,
    volumes,
)
from triage.layers.scheduling.framework import Exclude, FilterPlugin, Phase

FILTERS: tuple[FilterPlugin, ...] = (
    node_name.PLUGIN,
    gpu_node.PLUGIN,
    node_affinity.PLUGIN,
    taints.PLUGIN,
    unschedulable.PLUGIN,
    ports.PLUGIN,
    dra.PLUGIN,
    resources_fit.PLUGIN,
    volumes.PLUGIN,
    spread.PLUGIN,
    affinity.PLUGIN,
)

# Could the pod ever use a node: each plugin's exclusion, in order (the first that excludes
# names the node's category). NodeResourcesFit's size check comes after the constraints.
EXCLUDERS: tuple[Exclude, ...] = tuple(p.exclude for p in FILTERS if p.exclude is not None)
# The filters that read other objects (pods, volumes), before and after the fit.
BEFORE_FIT = tuple(p for p in FILTERS if p.make is not None and p.phase == Phase.BEFORE_FIT)
AFTER_FIT = tuple(p for p in FILTERS if p.make is not None and p.phase == Phase.AFTER_FIT)

# code -> the headline of the nodes it blocks ("{n} of {c} node(s) ...")
SUMMARIES = MappingProxyType(
    {code: text for p in FILTERS for code, text in p.reasons.items() if text}
)
# Codes of filters after the fit: the nodes they refuse have room for the pod, so they,
# rather than the nodes that are only full, explain why it waits.
AFTER_FIT_CODES = frozenset(c for p in FILTERS if p.phase == Phase.AFTER_FIT for c in p.reasons)

# What kube-scheduler says, mapped to the category the report gives it (first match wins);
# preemption is no filter, but its words come in the same message.
PREEMPTION = "preemption"
SCHEDULER_WORDS: tuple[tuple[str, str], ...] = (
    *((words, p.category) for p in FILTERS for words in p.scheduler_says),
    ("Preemption is not helpful", PREEMPTION),
    ("No preemption victims", PREEMPTION),
)
# The categories judged here from objects: the scheduler's words about the others are shown.
MODELLED = frozenset({p.category for p in FILTERS if p.modelled} | {PREEMPTION})
# An excluded category (or its first words) -> the code when no node passes that plugin.
EXCLUSION_CODES = MappingProxyType({k: v for p in FILTERS for k, v in p.exclusion_codes.items()})
# The pod fields the filters read: what a projection of a pod (the watch cache's) must keep.
POD_FIELDS = tuple(dict.fromkeys(f for p in FILTERS for f in p.pod_fields))


def needs_filters(pod: Obj) -> bool:
    """Whether any filter that reads other objects applies to the pod: remembered per spec
    for a pod (what the plugins look at is its spec, and whether it has a name yet)."""
    if not name_of(pod):
        return _needs_filters(pod)
    return _NEEDS.of(pod.get("spec") or {}, lambda _: _needs_filters(pod))


_NEEDS = PerSpec()


def _needs_filters(pod: Obj) -> bool:
    return any(p.applies(pod) for p in (*BEFORE_FIT, *AFTER_FIT))
