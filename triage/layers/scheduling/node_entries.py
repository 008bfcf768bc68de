"""Every node an evaluation judged, as the report's machine-readable `nodes` list: whether the
pod could use it now, and if not the layer, reason code, blocking object and the resources it
lacks. Built only when asked for (JSON and YAML output): at 5,000 nodes it is 5,000 entries."""

from __future__ import annotations

from triage.cluster.objects import Obj
from triage.cluster.quantities import fmt_amount
from triage.cluster.selectors import selector_mismatch
from triage.cluster.usage import NodeUsage
from triage.layers.node import NodeHealth
from triage.layers.scheduling.dra import NO_DRA
from triage.layers.scheduling.filters.gpu_node import CATEGORY
from triage.layers.scheduling.filters.resources_fit import MIG, NOT_OFFERED, TOO_SMALL
from triage.layers.scheduling.no_candidate import exclusion_code
from triage.layers.scheduling.placement import Evaluation, Placement
from triage.model import Layer, NodeEntry, NodeResource
from triage.signals import JOINING
from triage.vendors import is_accelerator


def node_entries(evaluation: Evaluation, placement: Placement) -> list[NodeEntry]:
    """One entry per node of the evaluation, sorted by name."""
    out = [NodeEntry(name=name, usable=True, eligible=True) for name in evaluation.usable]
    for fit in evaluation.blocked:
        text, _ = fit.describe()
        blocking = fit.pod or (f"node {fit.node}" if fit.code == "scheduling.cordoned" else None)
        out.append(NodeEntry(name=fit.node, usable=False, eligible=True, layer=fit.layer,
                             reason=fit.code, detail=text, blocking=blocking))  # fmt: skip
    for fit in evaluation.joining:
        out.append(NodeEntry(name=fit.node, usable=False, eligible=True, layer=Layer.DEVICE_PLUGIN,
                             reason=JOINING, detail=str(fit.joining)))  # fmt: skip
    for health, usage in zip(evaluation.short, evaluation.short_usage, strict=True):
        out.append(NodeEntry(
            name=health.name, usable=False, eligible=True, layer=Layer.SCHEDULING,
            reason="scheduling.insufficient", detail=_short_text(health, placement, usage),
            resources=_short(health, placement, usage),
        ))  # fmt: skip
    for (category, _), pool in evaluation.excluded.items():
        code = exclusion_code(category)
        for node, health in pool:
            out.append(NodeEntry(
                name=health.name, usable=False, eligible=False, layer=Layer.SCHEDULING,
                reason=code, detail=placement.exclusion_text(category, node, health),
                blocking=_excluded_by(category, placement, node, health),
            ))  # fmt: skip
    return sorted(out, key=lambda e: e.name)


def _excluded_by(category: str, placement: Placement, node: Obj, health: NodeHealth) -> str:
    """What excludes the node, as an object: the taint, the labels the pod asks for, the
    resource it lacks; else the exclusion's own words."""
    if category.startswith("untolerated taint "):
        return "taint " + category.removeprefix("untolerated taint ")
    if category == "selector mismatch":
        pairs = [m.split(" (")[0] for m in selector_mismatch(placement.pod, node)]
        return ", ".join(p if p == "required node affinity" else f"label {p}" for p in pairs)
    requests = placement.requests
    if category in CATEGORY.values():
        return "resource " + next(filter(is_accelerator, requests), "GPU")
    if category in (TOO_SMALL, NOT_OFFERED, MIG):
        alloc = health.allocatable_all
        lacking = [r for r, v in requests.items() if r != "pods" and alloc.get(r, 0) < v]
        return "resource " + (lacking[0] if lacking else next(iter(requests), "?"))
    if category == NO_DRA:
        return "the pod's ResourceClaims"
    return category


def _short(health: NodeHealth, placement: Placement, usage: NodeUsage | None) -> list[NodeResource]:
    used = usage.requests if usage else {}
    alloc = health.allocatable_all
    out = []
    for res, want in placement.requests.items():
        if res not in alloc:
            continue
        free = max(alloc[res] - used.get(res, 0), 0)
        if want > free:
            out.append(NodeResource(resource=res, asked=fmt_amount(res, want),
                                    free=fmt_amount(res, free),
                                    allocatable=fmt_amount(res, alloc[res])))  # fmt: skip
    pods = alloc.get("pods")
    if pods is not None and usage is not None and len(usage.pods) >= pods:
        out.append(NodeResource(resource="pods", asked="1", free="0", allocatable=str(pods)))
    return out


def _short_text(health: NodeHealth, placement: Placement, usage: NodeUsage | None) -> str:
    short = _short(health, placement, usage)
    return f"node {health.name}: " + "; ".join(
        f"{r.free} {r.resource} free, pod requests {r.asked}" for r in short
    )
