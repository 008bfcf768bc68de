"""The triage engine: runs the layer checks for one pod and applies the root-cause rule.

Root-cause rule (design brief): the failing layer is the lowest layer that explains why *this*
pod is not running on the nodes it could otherwise use. Problems on nodes the pod could never
use are side findings. Object state decides; events add evidence when they still exist.

The checks run in layer order (`CHECKS`): the pod's own node when it has one (driver, device
plugin), every node it could use when it has none (scheduling, which judges each node's
driver and device plugin too), then quota and queues. Each is a `LayerCheck` (see
`triage.layers.base`); this module only combines their outcomes.
"""

from __future__ import annotations

from contextlib import suppress
from dataclasses import replace
from datetime import UTC, datetime
from itertools import chain, islice
from typing import NamedTuple

from triage.assemble import Diagnosis, Judged, Route, answer_of, assemble, judge, judged
from triage.cluster.events import parse_time
from triage.cluster.indexes import INDEXERS, troubled_pods
from triage.cluster.objects import Obj, meta, pod_problem, workload_finished
from triage.cluster.reads import SweepState
from triage.cluster.source import ClusterSource, ReadFailedError
from triage.config import EngineConfig
from triage.layers import bound
from triage.layers.base import CheckResult, Context, LayerCheck
from triage.layers.health import NodeHealths
from triage.layers.quota import check as quota
from triage.layers.scheduling import check as scheduling
from triage.layers.scheduling.shared import warm_shapes
from triage.layers.stacks.view import load_view
from triage.model import LAYER_ORDER, Answer, Layer, TriageReport, TriageVerdict
from triage.playbooks import Playbook, load_playbook
from triage.signals import JOINING, REPORTED, WAITING, Signal
from triage.target import Target, resolve

CHECKS: tuple[LayerCheck, ...] = (bound.check, scheduling.check, quota.check)


def triage(
    source: ClusterSource,
    *,
    namespace: str,
    name: str,
    config: EngineConfig | None = None,
    playbook: Playbook | None = None,
    now: datetime | None = None,
    sweep: SweepState | None = None,
    nodes: bool = False,
) -> TriageReport:
    """Explain why the pod (or workload) `namespace/name` is not running. `sweep` is the state
    a fleet sweep's triages share (`triage.fleet`); `nodes` adds every node judged for the
    pod to the report (`TriageReport.nodes`: what JSON and YAML output carry).

    Raises `InvalidNameError` for names Kubernetes would reject, `NotFoundError` when neither a
    pod nor a workload of that name exists (or the namespace does not), and other
    `SourceError`s when the cluster cannot be read at all.
    """
    d, ctx = _diagnose(
        source, namespace, name, config=config, playbook=playbook, now=now, sweep=sweep
    )
    view = ctx.view
    return assemble(
        d,
        notes=[*source.coverage_notes(), *ctx.notes],  # what the source lacks, then the checks'
        now=now,
        gpu_stack=view.describe(),
        operator_namespace=view.namespace,
        stack_values=view.playbook_values(),
        nodes=nodes,
    )


def verdict(
    source: ClusterSource,
    *,
    namespace: str,
    name: str,
    config: EngineConfig | None = None,
    playbook: Playbook | None = None,
    now: datetime | None = None,
    sweep: SweepState | None = None,
) -> TriageVerdict:
    """`triage`'s verdict (failing layer, headline, cause, owner) without the evidence and
    steps of a full report. Raises as `triage` does."""
    d, _ = _diagnose(
        source, namespace, name, config=config, playbook=playbook, now=now, sweep=sweep,
        verdict_only=True,
    )  # fmt: skip
    return judge(d)


def sweep_verdict(
    source: ClusterSource,
    *,
    namespace: str,
    name: str,
    config: EngineConfig,
    playbook: Playbook,
    now: datetime | None,
    sweep: SweepState,
) -> Judged:
    """`verdict` as the fleet view keeps it for each of thousands of workloads (`Judged`:
    without the pod reference it has already). Raises as `triage` does."""
    d, _ = _diagnose(
        source, namespace, name, config=config, playbook=playbook, now=now, sweep=sweep,
        verdict_only=True,
    )  # fmt: skip
    return judged(d)


class Prepared(NamedTuple):
    """What `prepare` did ahead: nodes whose health it judged, pod shapes it evaluated."""

    nodes: int
    shapes: int


def prepare(source: ClusterSource, *, config: EngineConfig | None = None) -> Prepared:
    """Work the triages of pods without a node start with, done ahead: the cluster's GPU
    stack view, every node's health under it, the pod indexes the source keeps, and the nodes
    evaluated once for each shape of the pods waiting for a node (their node classes). A bot
    calls it once a cache has synced, so that the first question asked is answered as fast
    as the next (the source's memo keeps the work; the triages after it reassess only the
    nodes that changed). What cannot be read is left for the first triage to say."""
    config = config or EngineConfig()

    def read(kind: str, namespace: str | None) -> list[Obj] | None:
        try:
            return source.objects(kind, namespace=namespace)
        except ReadFailedError:
            return None

    for kind, index in INDEXERS:
        with suppress(ReadFailedError):
            source.indexed(kind, index, ())
    nodes = read("Node", None)
    if nodes is None:
        return Prepared(0, 0)
    view = load_view(read, override=config.operator_namespace, memo=source.memo)
    now = source.as_of or datetime.now(UTC)
    healths = NodeHealths(source.memo, now=now, grace_minutes=config.node_join_grace_minutes)
    judged = healths.all(nodes, view)
    try:
        waiting = [p for p in troubled_pods(source, namespace=None) if _waiting(p)]
        usage = source.node_usage()
        shapes = warm_shapes(source.memo, waiting, nodes, judged, usage)
    except ReadFailedError:
        shapes = 0
    return Prepared(len(judged), shapes)


def _waiting(pod: Obj) -> bool:
    """A pod waiting for a node: pending, bound to none."""
    return (pod.get("status") or {}).get("phase") == "Pending" and not (
        (pod.get("spec") or {}).get("nodeName")
    )


def _diagnose(
    source: ClusterSource,
    namespace: str,
    name: str,
    *,
    config: EngineConfig | None,
    playbook: Playbook | None,
    now: datetime | None,
    sweep: SweepState | None,
    verdict_only: bool = False,
) -> tuple[Diagnosis, Context]:
    """Every layer check run on the target, and the root-cause rule applied to their signals."""
    config = config or EngineConfig()
    # The namespace, then NAME or KIND/NAME (kubectl's short kinds): checked before any read.
    target = resolve(source, namespace=namespace, name=name)
    as_of = now or source.as_of or datetime.now(UTC)
    ctx = Context(
        source=source, config=config, target=target, now=as_of, sweep=sweep,
        verdict_only=verdict_only,
    )  # fmt: skip
    outcomes = [check(ctx) for check in CHECKS]
    # The GPU stack view, when no check read it (a pod bound to a node that is gone): a
    # report describes it, and a verdict counts what could not be read of it as a report does.
    _ = ctx.view
    signals = _root_cause(outcomes)
    relevant = _could_explain(target)
    answer = answer_of(signals, ctx.unknowns, relevant)
    playbook = playbook or load_playbook()
    diagnosis = Diagnosis(
        source=source,
        target=target,
        signals=signals,
        unknowns=ctx.unknowns,
        headline=_headline(ctx, outcomes, signals),
        ok_summaries={k: v for o in outcomes for k, v in o.ok.items()},
        route=_route(ctx, signals, answer, playbook),
        playbook=playbook,
        config=config,
        relevant=relevant,
        answer=answer,
        unread=tuple(ctx.unread),
        nodes=next((o.nodes for o in outcomes if o.nodes is not None), None),
    )
    return diagnosis, ctx


def _route(
    ctx: Context,
    signals: list[Signal],
    answer: tuple[Answer, Layer | None],
    playbook: Playbook,
) -> Route:
    """What the failing layer's owner route is chosen by (read here, so that assembling the
    report reads nothing): the namespace object, and the labels of the first nodes the
    failing layer blocks on; each only when the playbook routes by it (then the answer
    depends on it: a sweep that keeps answers triages again when it changes)."""
    said, failing = answer
    if said != Answer.BLOCKED or failing is None:
        return Route()
    namespace = None  # the route falls back to the layer's owner
    if failing in playbook.namespaces.layers:
        with suppress(ReadFailedError):
            namespace = ctx.source.get("Namespace", ctx.target.namespace)
    if not playbook.node_pools.routes:
        return Route(namespace)
    nodes = chain.from_iterable(s.nodes for s in signals if s.blocking and s.layer == failing)
    return Route(namespace, tuple(ctx.node_labels(n) for n in islice(nodes, 5)))


def _could_explain(target: Target) -> frozenset[Layer]:
    """The layers that could explain why the target is not running: none when its pod runs
    (or finished), the node's two when it is on a node, every layer while it waits for one,
    and admission (quota and queues) when its workload has no pod to judge."""
    pod = target.pod
    if pod is None:
        if _podless_headline_is_final(target):
            return frozenset()
        return frozenset({Layer.QUOTA})
    if pod_problem(pod) is None:
        return frozenset()
    if bound.rejection(pod) is not None:  # kubelet judged placement again, and refused
        return frozenset({Layer.DRIVER, Layer.DEVICE_PLUGIN, Layer.SCHEDULING})
    if bound.on_node(pod):
        return frozenset({Layer.DRIVER, Layer.DEVICE_PLUGIN})
    return frozenset(LAYER_ORDER)


def _podless_headline_is_final(target: Target) -> bool:
    """A workload scaled to zero or a finished Job: nothing to explain."""
    top = target.workloads[-1] if target.workloads else {}
    scaled_to_zero = (top.get("spec") or {}).get("replicas") == 0
    return scaled_to_zero or (target.kind == "Job" and workload_finished(top))


def _root_cause(outcomes: list[CheckResult]) -> list[Signal]:
    """Every layer's signals, with the scheduler's own words demoted to evidence when a queue
    explains them (Volcano reports its queue decisions as FailedScheduling)."""
    *below, queue = outcomes
    signals = [s for o in below for s in o.signals]
    if any(s.blocking for s in queue.signals):
        signals = [replace(s, blocking=False) if s.code == REPORTED else s for s in signals]
    return signals + queue.signals


def _headline(ctx: Context, outcomes: list[CheckResult], signals: list[Signal]) -> str | None:
    """The report's headline when no layer blocks; None lets the verdict write it."""
    if any(s.blocking for s in signals):
        return None
    t = ctx.target
    if t.pod is None:
        return _podless_headline(ctx)
    joining = next((s for s in signals if s.code in (JOINING, *WAITING)), None)
    if joining is not None:
        what = (
            joining.summary
            if joining.summary.startswith("waiting")
            else f"waiting: {joining.summary}"
        )
        return f"not blocked, {what}{_waited(t.pod, ctx.now)}"
    return next((o.headline for o in outcomes if o.headline), None)


def _waited(pod: Obj, now: datetime) -> str:
    """How long the pod has waited, to set beside how long its node has been coming up."""
    created = parse_time(meta(pod).get("creationTimestamp"))
    if created is None:
        return ""
    minutes = max(0, int((now - created).total_seconds() // 60))
    return f"; the pod has waited {minutes} min"


def _podless_headline(ctx: Context) -> str:
    t = ctx.target
    top = t.workloads[-1] if t.workloads else {}
    if (top.get("spec") or {}).get("replicas") == 0:
        return f"{t.kind} {t.name} is scaled to zero replicas: nothing to schedule"
    if t.kind == "Job" and workload_finished(top):
        return f"Job {t.name} has finished: no pods are needed"
    return (
        f"{t.kind} {t.name} has no pods and no blocking signal was found; "
        "check its controller's events"
    )
