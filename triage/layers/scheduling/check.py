"""The scheduling layer's check: could any node take the pod, and if not, why not?

Runs for a pod (or a workload's pod template) that has no node yet. Every node is judged:
its driver and device-plugin health, the scheduler's filters in the scheduler's order, the
pod's DRA claims; then the autoscaler's and preemption's answer when nothing fits now. For
a workload whose pods were never created, admission decides and this is a look-ahead: what
would stop a pod once created, never blocking.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Mapping
from typing import Any

from triage.cluster.objects import Obj, meta, name_of, ns_of
from triage.cluster.quantities import gpu_requests, pod_requests
from triage.cluster.source import ReadFailedError
from triage.cluster.usage import NodeUsage
from triage.layers.base import VIEW_EXACT, Context, Outcome
from triage.layers.bound import on_node
from triage.layers.scheduling.autoscaler import STATUS_NAME, STATUS_NS, ScalingReads
from triage.layers.scheduling.dra import check_claims
from triage.layers.scheduling.filters import FilterView, PodFilters, needs_filters, pods_on
from triage.layers.scheduling.placement import Evaluation, Placement
from triage.layers.scheduling.reasons import (
    evaluation_digest,
    node_signals,
    placement_summary,
    scheduling_signals,
)
from triage.layers.scheduling.scheduler import latest_failed_scheduling
from triage.model import Layer
from triage.signals import Signal, owned

REPORTED = "scheduling.scheduler-reported"  # the scheduler's words, when nothing explains them


def check(ctx: Context) -> Outcome:
    pod, placed = ctx.target.subject, ctx.target.pod
    if pod is None or on_node(placed):
        return Outcome()
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
        shape = _shape(ctx, pod, requests)
    filters: PodFilters | None = None
    if shape is not None:
        shared = shared_evaluation(ctx, shape, lambda: Placement(pod=pod, requests=requests))
        if shared is None:
            return _unjudged(ctx, pod, claims.signals)
        placement, evaluation = shared
    else:
        nodes = _nodes(ctx)
        if nodes is None:
            return _unjudged(ctx, pod, claims.signals)
        usage = _usage(ctx)
        filters = _filters(ctx, pod, nodes, usage, existing=existing)
        placement = Placement(
            pod=pod, requests=requests, dra=claims.node, only_nodes=only, filters=filters
        )
        healths = ctx.healths.all(nodes, stacks)
        evaluation = placement.evaluate(nodes, healths, usage, memo=ctx.memo)
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
    )
    if pod_level:  # it explains the scheduler's refusal: the message is evidence, not a cause
        signals = [s for s in signals if s.code != REPORTED]
    if placed is None:  # no pod exists yet: admission decides; placement is a look-ahead
        for i in range(len(signals)):
            s = owned(signals, i)
            s.blocking = False
            s.summary = f"once created: {s.summary}"
    out = Outcome(signals=claims.signals + signals)
    summary = placement_summary(evaluation)
    if summary and not pod_level:
        out.ok[Layer.SCHEDULING] = summary
    return out


Shape = tuple[str, str]
SHAPE = "shape"  # the tag of a shape's key among what a triage depends on


def _nodes(ctx: Context) -> list[Obj] | None:
    """Every node, or None when they cannot be read: each node's driver and device plugin
    are judged from its object, and placement is the nodes, so all three are then unknown."""
    return ctx.try_read("Node", None, layers=(Layer.DRIVER, Layer.DEVICE_PLUGIN, Layer.SCHEDULING))


def _unjudged(ctx: Context, pod: Obj, claims: list[Signal]) -> Outcome:
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
    return Outcome(signals=signals)


def shared_evaluation(
    ctx: Context, shape: Shape, placement: Placement | Callable[[], Placement]
) -> tuple[Placement, Evaluation] | None:
    """Every node judged for pods of one shape: once per sweep, shared by its triages (and
    once per triage outside a sweep). The triage depends on the digest of what it takes from
    the evaluation, not on the nodes it read for it (`Context.depend`). None when the nodes
    cannot be read (the layers are then unknown)."""
    shared, key = ctx.shared, (SHAPE, shape)
    if shared is not None and shape in shared:
        kept, evaluation, unknowns = shared[shape]
        for u in unknowns:  # what could not be read for the evaluation is unknown here too
            ctx.unknown(u.layer, u.reason, error=u.error)
        if evaluation is None:
            return None
        ctx.depend(key, shared[("digest", key)])
        return kept, evaluation
    if not isinstance(placement, Placement):
        placement = placement()
    before = len(ctx.unknowns)
    with ctx.aside():
        nodes = _nodes(ctx)
        if nodes is None:
            if shared is not None:
                shared[shape] = (placement, None, ctx.unknowns[before:])
            return None
        usage = _usage(ctx)
        healths = ctx.healths.all(nodes, ctx.view)
    made = placement
    if shared is None:
        evaluation = made.evaluate(nodes, healths, usage, memo=ctx.memo)
    else:
        # The last sweep's evaluation while every node, its health and its usage are the same
        # objects (a quiet cluster, or a change elsewhere): its digest is then the same too.
        evaluation = ctx.memo.get(
            ("shape-evaluation", shape),
            (*nodes, *healths, *usage.keys(), *usage.values()),
            lambda: made.evaluate(nodes, healths, usage, memo=ctx.memo),
        )
        shared[shape] = (placement, evaluation, ctx.unknowns[before:])
        pod = placement.pod
        node_signals(pod=pod, placement=placement, nodes=evaluation, gpu=gpu_requests(pod))
        ctx.depend(key, evaluation_digest(placement, evaluation), shared=True)
    return placement, evaluation


def shapes_in(shared: Mapping[Hashable, Any]) -> dict[tuple[str, Shape], Placement]:
    """The shapes a sweep evaluated, by the key triages depend on, with the placement that
    can evaluate each again (`shared_evaluation`) in a later sweep."""
    return {
        (SHAPE, k): v[0]
        for k, v in shared.items()
        if isinstance(k, tuple) and len(k) == 2 and k[0] == "placement"
    }


def _shape(ctx: Context, pod: Obj, requests: Mapping[str, int]) -> Shape | None:
    """What a node evaluation depends on, for a pod no filter plugin or claim applies to:
    pods of one shape get the same evaluation within a sweep. None for a pod bound by name.
    Remembered per pod spec (specs are replaced, never changed)."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return None
    known = ctx.memo.table("pod-shapes")
    hit = known.get(id(spec))
    if hit is not None and hit[0] is spec:
        return hit[1]  # type: ignore[no-any-return]
    affinity = (spec.get("affinity") or {}).get("nodeAffinity")
    raw = [spec.get("nodeSelector"), affinity, spec.get("tolerations"), sorted(requests.items()),
           bool(spec.get("resourceClaims"))]  # fmt: skip
    shape = ("placement", json.dumps(raw, sort_keys=True, default=str))
    known[id(spec)] = (spec, shape)
    return shape


def _usage(ctx: Context) -> Mapping[str, NodeUsage]:
    """What the pods on each node request; {} when the pods cannot be listed (free resources
    are then not known: the scheduling layer is unknown)."""
    try:
        return ctx.source.node_usage()
    except ReadFailedError as e:
        ctx.could_not(e, Layer.SCHEDULING)
        return {}


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
    )
    return PodFilters(
        view,
        existing_anti_affinity=existing,
        unread=lambda e: ctx.could_not(e, Layer.SCHEDULING),
    )


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
    usage = _usage(ctx)
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
