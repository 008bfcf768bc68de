"""Work shared by the triages of one sweep: every node judged once per pod shape.

Pods that no filter plugin or claim applies to, and that are bound to no node, get the same
evaluation when they share a shape: the same selector, affinity, tolerations and requests. A
sweep of thousands of stuck workloads evaluates every node once per shape (`shared_evaluation`),
and each triage depends on a digest of what it takes from that evaluation, not on every node
it read (`Context.depend`). Outside a sweep, each triage evaluates for itself. Also here: the
two reads every evaluation starts from, which say what could not be read.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Any, TypeVar

from triage.cluster.memo import IdentityMemo
from triage.cluster.objects import Obj
from triage.cluster.quantities import gpu_requests, pod_requests
from triage.cluster.source import ReadFailedError
from triage.cluster.usage import NodeUsage, UsageSnapshot, read_whole
from triage.layers.base import Context
from triage.layers.node import NodeHealth
from triage.layers.scheduling import by_class
from triage.layers.scheduling.placement import Evaluation, Placement
from triage.layers.scheduling.reasons import evaluation_digest, node_signals
from triage.layers.scheduling.registry import needs_filters
from triage.model import Layer

T = TypeVar("T")
Shape = tuple[str, str]
SHAPE = "shape"  # the tag of a shape's key among what a triage depends on


def read_nodes(ctx: Context) -> list[Obj] | None:
    """Every node, or None when they cannot be read: each node's driver and device plugin
    are judged from its object, and placement is the nodes, so all three are then unknown."""
    return ctx.try_read("Node", None, layers=(Layer.DRIVER, Layer.DEVICE_PLUGIN, Layer.SCHEDULING))


def read_usage(ctx: Context, *, whole: bool = False) -> Mapping[str, NodeUsage]:
    """What the pods on each node request; {} when the pods cannot be listed (free resources
    are then not known: the scheduling layer is unknown). A source may read usage as it is
    asked for (the live one reads the nodes a triage asks about): `whole` reads all of it
    now, for work that may ask about any node; otherwise use it through `using`."""
    try:
        usage = ctx.source.node_usage()
        if whole:
            read_whole(usage)
        return usage
    except ReadFailedError as e:
        ctx.could_not(e, Layer.SCHEDULING)
        return {}


def using(
    ctx: Context, usage: Mapping[str, NodeUsage], use: Callable[[Mapping[str, NodeUsage]], T]
) -> T:
    """`use(usage)`; when a read of usage read as asked fails there, free resources are not
    known, as when `read_usage` fails: the scheduling layer is unknown, and `use` judges with
    none. (`use` reads nothing else that raises.)"""
    try:
        return use(usage)
    except ReadFailedError as e:
        ctx.could_not(e, Layer.SCHEDULING)
        return use({})


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
        nodes = read_nodes(ctx)
        if nodes is None:
            if shared is not None:
                shared[shape] = (placement, None, ctx.unknowns[before:])
            return None
        usage = read_usage(ctx)
        healths = ctx.healths.all(nodes, ctx.view)
    made = placement

    def judge(usage: Mapping[str, NodeUsage]) -> Evaluation:
        if shared is None:
            return by_class.evaluate(made, nodes, healths, usage, memo=ctx.memo)
        # The last sweep's evaluation while every node, its health and its usage are the same
        # objects (a quiet cluster, or a change elsewhere): its digest is then the same too.
        return ctx.memo.get_lists(
            ("shape-evaluation", shape),
            (nodes, healths, *_usage_parts(usage)),
            lambda: by_class.evaluate(made, nodes, healths, usage, memo=ctx.memo),
        )

    evaluation = using(ctx, usage, judge)
    if shared is not None:
        shared[shape] = (placement, evaluation, ctx.unknowns[before:])
        pod = placement.pod
        node_signals(pod=pod, placement=placement, nodes=evaluation, gpu=gpu_requests(pod))
        ctx.depend(key, evaluation_digest(placement, evaluation), shared=True)
    return placement, evaluation


def _usage_parts(usage: Mapping[str, NodeUsage]) -> tuple[list[Any], ...]:
    """Usage as what an evaluation is remembered by (`IdentityMemo.get_lists`): a usage
    index's snapshot is one object per generation and never changed, so the same snapshot is
    the same usage (not 20,000 nodes and their usage compared); another mapping, by its
    nodes and their usage."""
    if isinstance(usage, UsageSnapshot):
        return ([usage],)
    return ([*usage.keys()], [*usage.values()])


def shapes_in(shared: Mapping[Hashable, Any]) -> dict[tuple[str, Shape], Placement]:
    """The shapes a sweep evaluated, by the key triages depend on, with the placement that
    can evaluate each again (`shared_evaluation`) in a later sweep."""
    return {
        (SHAPE, k): v[0]
        for k, v in shared.items()
        if isinstance(k, tuple) and len(k) == 2 and k[0] == "placement"
    }


def pod_shape(ctx: Context, pod: Obj, requests: Mapping[str, int]) -> Shape | None:
    """What a node evaluation depends on, for a pod no filter plugin or claim applies to:
    pods of one shape get the same evaluation within a sweep. None for a pod bound by name.
    Remembered per pod spec (specs are replaced, never changed)."""
    return _shape(ctx.memo, pod, requests)


def warm_shapes(
    memo: IdentityMemo,
    pods: Iterable[Obj],
    nodes: list[Obj],
    healths: list[NodeHealth],
    usage: Mapping[str, NodeUsage],
    *,
    limit: int = 64,
) -> int:
    """The nodes evaluated once for each shape of the pods waiting for a node (at most
    `limit` shapes), as the first triage of a pod of that shape would evaluate them: the node
    classes, layouts and fits it makes are kept in `memo` for the triages that follow. Pods
    a filter plugin or claim applies to are evaluated per triage and are skipped. Returns
    the shapes evaluated."""
    seen: set[Shape] = set()
    for pod in pods:
        spec = pod.get("spec") or {}
        if spec.get("resourceClaims") or needs_filters(pod):
            continue
        requests = pod_requests(pod)
        shape = _shape(memo, pod, requests)
        if shape is None or shape in seen:
            continue
        seen.add(shape)
        by_class.evaluate(Placement(pod=pod, requests=requests), nodes, healths, usage, memo=memo)
        if len(seen) >= limit:
            break
    return len(seen)


def _shape(memo: IdentityMemo, pod: Obj, requests: Mapping[str, int]) -> Shape | None:
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return None
    known = memo.table("pod-shapes")
    hit = known.get(id(spec))
    if hit is not None and hit[0] is spec:
        return hit[1]  # type: ignore[no-any-return]
    affinity = (spec.get("affinity") or {}).get("nodeAffinity")
    raw = [spec.get("nodeSelector"), affinity, spec.get("tolerations"), sorted(requests.items()),
           bool(spec.get("resourceClaims"))]  # fmt: skip
    shape = ("placement", json.dumps(raw, sort_keys=True, default=str))
    known[id(spec)] = (spec, shape)
    return shape
