"""The scheduling layer's check: could any node take the pod, and if not, why not?

Runs for a pod (or a workload's pod template) that has no node yet. Every node is judged:
its driver and device-plugin health, the scheduler's filters in the scheduler's order, the
pod's DRA claims; then the autoscaler's and preemption's answer when nothing fits now. For
a workload whose pods were never created, admission decides and this is a look-ahead: what
would stop a pod once created, never blocking.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from triage.cluster.indexes import active_pods
from triage.cluster.objects import Obj, meta, name_of, ns_of
from triage.cluster.quantities import gpu_requests, pod_requests
from triage.cluster.source import ReadFailedError
from triage.cluster.usage import NodeUsage
from triage.layers.base import VIEW_EXACT, CheckResult, Context
from triage.layers.bound import on_node
from triage.layers.node_context import explain_nodes
from triage.layers.scheduling import by_class
from triage.layers.scheduling.autoscaler import STATUS_NAME, STATUS_NS, ScalingReads
from triage.layers.scheduling.dra import check_claims
from triage.layers.scheduling.filters.view import FilterView, pods_on
from triage.layers.scheduling.node_entries import node_entries
from triage.layers.scheduling.placement import Placement
from triage.layers.scheduling.pod_filters import PodFilters
from triage.layers.scheduling.reasons import (
    placement_summary,
    scheduling_signals,
)
from triage.layers.scheduling.registry import needs_filters
from triage.layers.scheduling.scheduler import latest_failed_scheduling
from triage.layers.scheduling.shared import (
    pod_shape,
    read_nodes,
    read_usage,
    shared_evaluation,
    using,
)
from triage.model import Layer
from triage.signals import REPORTED, Signal


def check(ctx: Context) -> CheckResult:
    pod, placed = ctx.target.subject, ctx.target.pod
    if pod is None or on_node(placed):
        return CheckResult()
    stacks = ctx.view
    claims = check_claims(ctx, pod, stacks)
    only = claims.nodes
    if only is not None:
        # A node whose DRA kubelet plugin is down publishes nothing, yet the pod could use
        # it: it stays a candidate, and its missing ResourceSlice is the device-plugin layer.
        only |= {n for n, roles in stacks.pods_by_node.items() if "dra-plugin" in roles}
    existing = _existing_anti_affinity(ctx, pod)
    requests = pod_requests(pod)
    shape = None
    if not (existing or needs_filters(pod)) and claims.node is None and only is None:
        shape = pod_shape(ctx, pod, requests)
    filters: PodFilters | None = None
    if shape is not None:
        shared = shared_evaluation(ctx, shape, lambda: Placement(pod=pod, requests=requests))
        if shared is None:
            return _unjudged(ctx, pod, claims.signals)
        placement, evaluation = shared
    else:
        nodes = read_nodes(ctx)
        if nodes is None:
            return _unjudged(ctx, pod, claims.signals)
        usage = read_usage(ctx, whole=True)  # the filters may ask about any node
        filters = _filters(ctx, pod, nodes, usage, existing=existing)
        placement = Placement(
            pod=pod, requests=requests, dra=claims.node, only_nodes=only, filters=filters
        )
        healths = ctx.healths.all(nodes, stacks)
        evaluation = by_class.evaluate(placement, nodes, healths, usage, memo=ctx.memo)
        # node health judged here from the view's pods, outside any shared work
        ctx.depend(VIEW_EXACT, stacks, shared=True)
    pod_level = filters.pod_level() if filters is not None else []
    signals = pod_level + scheduling_signals(
        pod=pod,
        placement=placement,
        nodes=evaluation,
        gpu=gpu_requests(pod),
        events=ctx.pod_events,
        now=ctx.now,
        reads=_scaling_reads(ctx, pod),
        verdict_only=ctx.verdict_only,
    )
    if pod_level:  # it explains the scheduler's refusal: the message is evidence, not a cause
        signals = [s for s in signals if s.code != REPORTED]
    if claims.vendor:  # the DRA driver's vendor: the report's steps are that vendor's
        signals = [
            replace(s, values={"vendor": claims.vendor, **s.values})
            if "dra" in s.code and "vendor" not in s.values else s
            for s in signals
        ]  # fmt: skip
    if claims.context:  # what the pod's allocated claims hold it to
        first = next((i for i, s in enumerate(signals) if s.blocking), None)
        if first is not None:
            signals[first] = signals[first].with_evidence(first=claims.context)
    signals = explain_nodes(ctx, signals)
    if placed is None:  # no pod exists yet: admission decides; placement is a look-ahead
        signals = [
            replace(s, blocking=False, summary=f"once created: {s.summary}") for s in signals
        ]
    out = CheckResult(
        signals=claims.signals + signals, nodes=lambda: node_entries(evaluation, placement)
    )
    summary = placement_summary(evaluation)
    if summary and not pod_level:
        out.ok[Layer.SCHEDULING] = summary
    return out


def _unjudged(ctx: Context, pod: Obj, claims: list[Signal]) -> CheckResult:
    """The nodes could not be read: no node is judged (an empty list would read as "the
    cluster has no GPU node"); the scheduler's own words, when it left any, are evidence."""
    signals = list(claims)
    said = latest_failed_scheduling(pod, ctx.pod_events)
    if said is not None:
        signals.append(
            Signal(
                Layer.SCHEDULING,
                REPORTED,
                f"the scheduler reports: {said[0]}",
                blocking=False,
                evidence=[f"scheduler: {said[0]}"],
            )
        )
    return CheckResult(signals=signals)


def _existing_anti_affinity(ctx: Context, pod: Obj) -> bool:
    """Whether the scheduler reports running pods' anti-affinity: only then are all running
    pods scanned for it."""
    sched = latest_failed_scheduling(pod, ctx.pod_events)
    return sched is not None and "existing pods anti-affinity" in sched[0]


def _filters(
    ctx: Context,
    pod: Obj,
    nodes: list[Obj],
    usage: Mapping[str, NodeUsage],
    *,
    existing: bool,
) -> PodFilters | None:
    """The volume, port, spread and pod-affinity filters, when any applies to the pod."""
    if not existing and not needs_filters(pod):
        return None
    source = ctx.source
    view = FilterView(
        pod,
        get=lambda kind, name, ns: source.get(kind, name, namespace=ns),
        read=lambda kind, ns: source.objects(kind, namespace=ns),
        events=ctx.events,
        nodes=nodes,
        usage=usage,
        existing_anti_affinity=existing,
        active_pods=lambda ns: active_pods(source, namespace=ns),
    )
    return PodFilters(view, unread=lambda e: ctx.could_not(e, Layer.SCHEDULING))


def _scaling_reads(ctx: Context, pod: Obj) -> ScalingReads:
    def ca_status() -> Obj | None:
        try:
            return ctx.source.get("ConfigMap", STATUS_NAME, namespace=STATUS_NS)
        except ReadFailedError as e:
            ctx.note(f"cluster-autoscaler status not read ({e})")
            return None

    def autoscalers() -> list[str]:
        return [
            f"{meta(d).get('namespace')}/{name_of(d)}"
            for d in ctx.read("Deployment", None, layer=Layer.SCHEDULING)
            if any(k in name_of(d) for k in ("cluster-autoscaler", "karpenter"))
            and ((d.get("status") or {}).get("readyReplicas") or 0) > 0
        ]

    return ScalingReads(
        dated=ctx.volatile,
        victims=_victims(ctx, pod),
        autoscalers=autoscalers,
        karpenter=lambda kind: ctx.read(kind, None, layer=Layer.SCHEDULING),
        ca_status=ca_status,
    )


def _victims(ctx: Context, pod: Obj) -> list[tuple[str, str]]:
    """Terminating lower-priority pods on the node the scheduler nominated for `pod`, as
    (what a tenant may read, operator-only name)."""
    node = (pod.get("status") or {}).get("nominatedNodeName")
    if not node:
        return []
    usage = read_usage(ctx)
    mine = int((pod.get("spec") or {}).get("priority") or 0)
    out = []
    getter = ctx.getter(Layer.SCHEDULING)
    for p in using(ctx, usage, lambda usage: pods_on(str(node), usage, getter)):
        if int((p.get("spec") or {}).get("priority") or 0) < mine and meta(p).get(
            "deletionTimestamp"
        ):
            ref = f"{ns_of(p)}/{name_of(p)}"
            mine_ns = ns_of(p) == ctx.target.namespace
            out.append((ref, "") if mine_ns else ("a pod in another namespace", ref))
    return out
