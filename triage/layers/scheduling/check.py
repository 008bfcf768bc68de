"""The scheduling layer's check: could any node take the pod, and if not, why not?

Runs for a pod (or a workload's pod template) that has no node yet. Every node is judged:
its driver and device-plugin health, the scheduler's filters in the scheduler's order, the
pod's DRA claims; then the autoscaler's and preemption's answer when nothing fits now. For
a workload whose pods were never created, admission decides and this is a look-ahead: what
would stop a pod once created, never blocking.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from triage.cluster.objects import Obj, meta, name_of, ns_of
from triage.cluster.quantities import gpu_requests, pod_requests
from triage.cluster.source import ForbiddenError, SourceError
from triage.cluster.usage import NodeUsage
from triage.layers.base import Context, Outcome
from triage.layers.bound import on_node
from triage.layers.scheduling.autoscaler import STATUS_NAME, STATUS_NS, ScalingReads
from triage.layers.scheduling.dra import check_claims
from triage.layers.scheduling.filters import FilterView, PodFilters, needs_filters, pods_on
from triage.layers.scheduling.placement import Placement
from triage.layers.scheduling.reasons import placement_summary, scheduling_signals
from triage.layers.scheduling.scheduler import latest_failed_scheduling
from triage.model import Layer
from triage.signals import Unknown

REPORTED = "scheduling.scheduler-reported"  # the scheduler's words, when nothing explains them


def check(ctx: Context) -> Outcome:
    pod, placed = ctx.target.subject, ctx.target.pod
    if pod is None or on_node(placed):
        return Outcome()
    nodes = ctx.read("Node", None, layer=Layer.SCHEDULING)
    usage = _usage(ctx)
    stacks = ctx.view
    claims = check_claims(ctx, pod, stacks)
    only = claims.nodes
    if only is not None:
        # A node whose DRA kubelet plugin is down publishes nothing, yet the pod could use
        # it: it stays a candidate, and its missing ResourceSlice is the device-plugin layer.
        only |= {n for n, roles in stacks.pods_by_node.items() if "dra-plugin" in roles}
    filters = _filters(ctx, pod, nodes, usage)
    pod_level = filters.pod_level() if filters is not None else []
    requests = pod_requests(pod)
    shape = (
        _shape(pod, requests) if filters is None and claims.node is None and only is None else None
    )
    shared = ctx.shared if shape is not None else None
    if shared is not None and shape in shared:
        placement, evaluation = shared[shape]
    else:
        placement = Placement(
            pod=pod, requests=requests, dra=claims.node, only_nodes=only, filters=filters
        )
        evaluation = placement.evaluate(nodes, ctx.healths.all(nodes, stacks), usage)
        if shared is not None:
            shared[shape] = (placement, evaluation)
    signals = pod_level + scheduling_signals(
        pod=pod,
        placement=placement,
        nodes=evaluation,
        gpu=gpu_requests(pod),
        events=ctx.pod_events,
        now=ctx.now,
        reads=_scaling_reads(ctx, pod, usage),
    )
    if pod_level:  # it explains the scheduler's refusal: the message is evidence, not a cause
        signals = [s for s in signals if s.code != REPORTED]
    out = Outcome(signals=claims.signals + signals)
    summary = placement_summary(evaluation)
    if summary and not pod_level:
        out.ok[Layer.SCHEDULING] = summary
    if placed is None:  # no pod exists yet: admission decides; placement is a look-ahead
        for s in signals:
            s.blocking = False
            s.summary = f"once created: {s.summary}"
    return out


def _shape(pod: Obj, requests: Mapping[str, int]) -> tuple[str, str] | None:
    """What a node evaluation depends on, for a pod no filter plugin or claim applies to:
    pods of one shape get the same evaluation within a sweep. None for a pod bound by name."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return None
    affinity = (spec.get("affinity") or {}).get("nodeAffinity")
    raw = [spec.get("nodeSelector"), affinity, spec.get("tolerations"), sorted(requests.items()),
           bool(spec.get("resourceClaims"))]  # fmt: skip
    return ("placement", json.dumps(raw, sort_keys=True, default=str))


def _usage(ctx: Context) -> Mapping[str, NodeUsage]:
    try:
        return ctx.source.node_usage()
    except ForbiddenError as e:
        ctx.unknowns.append(Unknown(Layer.SCHEDULING, str(e)))
        return {}


def _filters(
    ctx: Context, pod: Obj, nodes: list[Obj], usage: Mapping[str, NodeUsage]
) -> PodFilters | None:
    """The volume, port, spread and pod-affinity filters, when any applies to the pod.
    Running pods' anti-affinity is looked for (a scan of every pod) only when the scheduler
    reports it."""
    sched = latest_failed_scheduling(pod, ctx.pod_events)
    existing = sched is not None and "existing pods anti-affinity" in sched[0]
    if not existing and not needs_filters(pod):
        return None
    view = FilterView(
        pod,
        get=ctx.getter(Layer.SCHEDULING),
        read=ctx.reader(Layer.SCHEDULING),
        events=ctx.events,
        nodes=nodes,
        usage=usage,
    )
    return PodFilters(view, existing_anti_affinity=existing)


def _scaling_reads(ctx: Context, pod: Obj, usage: Mapping[str, NodeUsage]) -> ScalingReads:
    def ca_status() -> Obj | None:
        try:
            return ctx.source.get("ConfigMap", STATUS_NAME, namespace=STATUS_NS)
        except SourceError as e:
            ctx.notes.append(f"cluster-autoscaler status not read ({e})")
            return None

    def autoscalers() -> list[str]:
        return [
            f"{meta(d).get('namespace')}/{name_of(d)}"
            for d in ctx.read("Deployment", None, layer=Layer.SCHEDULING)
            if any(k in name_of(d) for k in ("cluster-autoscaler", "karpenter"))
            and ((d.get("status") or {}).get("readyReplicas") or 0) > 0
        ]

    return ScalingReads(
        victims=_victims(ctx, pod, usage),
        autoscalers=autoscalers,
        karpenter=lambda kind: ctx.read(kind, None, layer=Layer.SCHEDULING),
        ca_status=ca_status,
    )


def _victims(ctx: Context, pod: Obj, usage: Mapping[str, NodeUsage]) -> list[tuple[str, str]]:
    """Terminating lower-priority pods on the node the scheduler nominated for `pod`, as
    (what a tenant may read, operator-only name)."""
    node = (pod.get("status") or {}).get("nominatedNodeName")
    if not node:
        return []
    mine = int((pod.get("spec") or {}).get("priority") or 0)
    out = []
    for p in pods_on(str(node), usage, ctx.getter(Layer.SCHEDULING)):
        if int((p.get("spec") or {}).get("priority") or 0) < mine and meta(p).get(
            "deletionTimestamp"
        ):
            ref = f"{ns_of(p)}/{name_of(p)}"
            mine_ns = ns_of(p) == ctx.target.namespace
            out.append((ref, "") if mine_ns else ("a pod in another namespace", ref))
    return out
