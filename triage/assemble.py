"""Assembles the TriageReport from signals: one finding per layer, the verdict (the lowest
blocking layer), the owner route and the playbook's steps."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import chain
from typing import NamedTuple

from triage.cluster.memo import IdentityMemo
from triage.cluster.objects import Obj, name_of
from triage.cluster.quantities import GPU, gpu_requests, pod_requests, wants_gpu
from triage.cluster.source import ClusterSource, ReadFailedError
from triage.config import EngineConfig
from triage.model import (
    LAYER_ORDER,
    Answer,
    Cause,
    Finding,
    Layer,
    NodeEntry,
    OwnerRoute,
    PodRef,
    TriageReport,
    TriageVerdict,
    Unread,
    WorkloadRef,
    shared_fields,
)
from triage.playbooks import Playbook
from triage.references import Scope, items
from triage.signals import (
    Signal,
    Unknown,
    build_finding,
    codes_of,
    failing_summary,
    signal_refs,
)
from triage.target import Target
from triage.vendors import VENDORS, Vendor, vendor_of

OK_SUMMARY = {
    Layer.DRIVER: "no driver or runtime problem on the nodes this pod can use",
    Layer.DEVICE_PLUGIN: "the nodes this pod can use advertise their GPUs",
    Layer.SCHEDULING: "the pod's placement constraints can be met",
    Layer.QUOTA: "no quota or queue holds the pod",
}


def _data_age(source: ClusterSource) -> str | None:
    """Why the data might not be the cluster as it is now: a lagging watch, or a snapshot."""
    note = source.staleness_note()
    if note:
        return note
    as_of = source.as_of
    if as_of is not None:
        return f"cluster state as of {as_of:%Y-%m-%d %H:%M} UTC (snapshot)"
    return None


class Route(NamedTuple):
    """What the owner route of the failing layer is chosen by, read by the engine: the
    target's namespace object (None when it could not be read) and the labels of the first
    nodes the failing layer blocks on."""

    namespace: Obj | None = None
    node_labels: tuple[dict[str, str], ...] = ()


class Diagnosis(NamedTuple):
    """What a verdict is made from: a triage's signals after the root-cause rule, and what
    the checks left beside them (unknown layers, a headline, passing layers' lines). No
    cluster read happens past this point: the engine read everything it holds. (A tuple: a
    sweep makes one per workload.)"""

    source: ClusterSource
    target: Target
    signals: list[Signal]
    unknowns: list[Unknown]
    headline: str | None  # the headline when nothing blocks (None: the default)
    ok_summaries: dict[Layer, str]
    route: Route
    playbook: Playbook
    config: EngineConfig
    # The root-cause rule's answer and failing layer: `answer_of` the signals, the unknowns
    # and the layers that could explain the target.
    answer: tuple[Answer, Layer | None]
    # The layers that could explain why the target is not running (none when it runs): an
    # unknown among them, below the lowest blocking layer, leaves the answer unknown.
    relevant: frozenset[Layer] = frozenset(LAYER_ORDER)
    unread: tuple[ReadFailedError, ...] = ()  # reads that failed without a layer to blame
    nodes: Callable[[], list[NodeEntry]] | None = None  # every node judged, built when asked


def _findings(
    d: Diagnosis, layers: tuple[Layer, ...] = LAYER_ORDER, *, complete: bool = False
) -> dict[Layer, Finding]:
    """One finding per layer in `layers`; `complete`: no line left out, and each with the
    objects it names (`Finding.evidence_items`), for `-o json|yaml|wide`."""
    subject = d.target.subject
    gpu = subject is not None and wants_gpu(subject, pod_requests(subject))
    by_layer: dict[Layer, list[Signal]] = {layer: [] for layer in LAYER_ORDER}
    for s in d.signals:
        by_layer[s.layer].append(s)
    found = {
        layer: build_finding(
            layer,
            by_layer[layer],
            d.unknowns,
            ok_summary=d.ok_summaries.get(layer, OK_SUMMARY[layer]),
            skipped=(
                "the pod requests no accelerator"
                if not gpu and layer in (Layer.DRIVER, Layer.DEVICE_PLUGIN)
                else None
            ),
            limit=None if complete else d.config.max_evidence,
        )
        for layer in layers
    }
    if not complete:
        return found
    pod = d.target.pod
    scope = Scope(namespace=d.target.namespace, pod=name_of(pod) if pod is not None else None)
    given = signal_refs(d.signals)
    return {
        layer: f.model_copy(
            update={
                "evidence_items": items(f.evidence, scope, given),
                "detail_items": items(f.detail, scope, given),
            }
        )
        for layer, f in found.items()
    }


def _failing(signals: list[Signal]) -> Layer | None:
    """The lowest layer with a blocking signal."""
    return min((s.layer for s in signals if s.blocking), key=lambda la: la.rank, default=None)


def _layers_of(unknowns: list[Unknown]) -> list[Layer]:
    """The layers that could not be judged, lowest first."""
    if not unknowns:
        return []
    return sorted({u.layer for u in unknowns}, key=lambda la: la.rank)


def _unknown_in(unknowns: list[Unknown], relevant: frozenset[Layer]) -> list[Layer]:
    """Those of them that could explain the target, lowest first."""
    return [la for la in _layers_of(unknowns) if la in relevant]


def answer_of(
    signals: list[Signal], unknowns: list[Unknown], relevant: frozenset[Layer]
) -> tuple[Answer, Layer | None]:
    """The root-cause rule's verdict: the lowest blocking layer, unless a layer below it that
    could explain the pod could not be judged; then the answer is unknown, never a guess."""
    failing = _failing(signals)
    unknown = _unknown_in(unknowns, relevant)
    if unknown and (failing is None or unknown[0].rank < failing.rank):
        return Answer.UNKNOWN, None
    return (Answer.BLOCKED, failing) if failing is not None else (Answer.CLEAR, None)


class _Decision(NamedTuple):
    """The verdict of a triage: its answer and failing layer (None unless blocked), headline,
    owner and cause, and the failing layer's blocking signals they rest on. (A tuple: a sweep
    makes one per workload.)"""

    answer: Answer
    failing: Layer | None
    headline: str
    owner: OwnerRoute | None = None
    cause: Cause | None = None
    mine: Sequence[Signal] = ()


def _decide(d: Diagnosis) -> _Decision:
    """The verdict: what the failing layer's finding says of it (its summary and leading
    code) comes from its blocking signals alone, so it is the same with or without the
    finding's evidence."""
    answer, failing = d.answer
    t = d.target
    if answer == Answer.UNKNOWN:
        return _Decision(answer, None, _unknown_headline(d))
    if failing is None:
        return _Decision(
            answer, None, d.headline or f"{t.kind} {t.name}: nothing blocks it at any layer"
        )
    mine = [s for s in d.signals if s.blocking and s.layer == failing]
    code = mine[0].code
    owner = d.playbook.route(
        failing,
        namespace=d.route.namespace,
        node_labels=list(d.route.node_labels),
        codes=[code],
    )
    cause = _cause(
        failing,
        code,
        tuple(s.nodes for s in mine if s.nodes),
        tuple(dict.fromkeys(o for s in mine for o in s.objects)),
        next((s.values["vendor"] for s in mine if s.values.get("vendor")), None),
    )
    return _Decision(
        answer, failing, f"{failing.value}: {failing_summary(mine)}", owner, cause, mine
    )


# Causes by what they hold: the triages of a sweep that block alike (one pool full, one
# quota spent) share one (immutable) cause rather than each making its own. A cause naming
# many nodes is known by its signals' node lists, which one pod shape's triages share in a
# sweep (a "pool full" signal names thousands of nodes), and kept for as few shapes as were
# last seen: at 20,000 nodes each holds up to 300 KB.
_CAUSES = IdentityMemo(maxsize=1024)
_POOL_CAUSES = IdentityMemo(maxsize=32)


def _cause(
    layer: Layer,
    code: str,
    lists: tuple[Sequence[str], ...],
    objects: tuple[str, ...],
    vendor: str | None,
) -> Cause:
    """The cause of a verdict whose blocking signals name the nodes in `lists`: every one of
    them, sorted (the list is shared: callers must not change it)."""

    def make(nodes: list[str]) -> Cause:
        # Built from typed values: not validated again, so that a cause blocking on a whole
        # pool keeps its sorted node list rather than copying thousands of names.
        return Cause.model_construct(
            layer=layer, code=code, nodes=nodes, objects=list(objects), vendor=vendor
        )

    if sum(map(len, lists)) <= 16:
        nodes = sorted(set(chain.from_iterable(lists)))
        return _CAUSES.get((layer, code, objects, vendor, tuple(nodes)), (), lambda: make(nodes))
    return _POOL_CAUSES.get(
        (layer, code, objects, vendor, tuple(map(id, lists))),
        lists,
        lambda: make(sorted(set(chain.from_iterable(lists)))),
    )


def _unknown_headline(d: Diagnosis) -> str:
    """What could not be judged and why; what is known above it, when something is."""
    unknown = _unknown_in(d.unknowns, d.relevant)
    why = next(u.reason for u in d.unknowns if u.layer == unknown[0])
    head = f"unknown: {', '.join(la.value for la in unknown)} could not be judged ({why})"
    failing = _failing(d.signals)
    if failing is not None:
        above = next(s for s in d.signals if s.blocking and s.layer == failing)
        head += f"; above it, {failing.value}: {above.summary}"
    return head


def unread_of(unknowns: list[Unknown], others: tuple[ReadFailedError, ...] = ()) -> list[Unread]:
    """The failed reads behind the unknown layers (and those that left no layer unknown), one
    entry per read with every layer it left unknown."""
    if not unknowns and not others:
        return []
    by_read: dict[tuple[str, str, str | None, str], tuple[ReadFailedError, list[Layer]]] = {}
    for error, layer in [(u.error, u.layer) for u in unknowns] + [(e, None) for e in others]:
        if error is None:
            continue
        k = (error.verb, error.resource, error.namespace, str(error))
        _, layers = by_read.setdefault(k, (error, []))
        if layer is not None and layer not in layers:
            layers.append(layer)
    return [
        Unread(
            verb=e.verb,
            resource=e.resource,
            namespace=e.namespace,
            fault=e.fault,
            message=str(e),
            grant=e.grant,
            layers=sorted(layers, key=lambda la: la.rank),
        )
        for e, layers in by_read.values()
    ]


class Judged(NamedTuple):
    """What a fleet sweep keeps of one triage: a `TriageVerdict` without the pod reference and
    the unknown layers, which the sweep does not use (a tuple, not models: a sweep made three
    for each of thousands of workloads, ~9% of its time)."""

    answer: Answer
    failing_layer: Layer | None
    headline: str
    owner: OwnerRoute | None
    cause: Cause | None
    unread: list[Unread]


def judged(d: Diagnosis) -> Judged:
    """The verdict alone, as `assemble` would give it: no evidence, steps or other layers'
    findings (for the fleet view, which triages thousands of workloads a sweep)."""
    decision = _decide(d)
    return Judged(
        decision.answer,
        decision.failing,
        decision.headline,
        decision.owner,
        decision.cause,
        unread_of(d.unknowns, d.unread),
    )


def judge(d: Diagnosis) -> TriageVerdict:
    """`judged`, as a verdict of the target."""
    found = judged(d)
    verdict = TriageVerdict(
        cluster=d.source.cluster_name,
        pod=_pod_ref(d.target),
        failing_layer=found.failing_layer,
        headline=found.headline,
        cause=found.cause,
        owner=found.owner,
        answer=found.answer,
        unknown_layers=_layers_of(d.unknowns),
        unread=found.unread,
    )
    return shared_fields(verdict)


def assemble(
    d: Diagnosis,
    *,
    notes: list[str],
    now: datetime | None,
    gpu_stack: list[str] | None = None,
    operator_namespace: str | None = None,
    stack_values: dict[str, str] | None = None,
    nodes: bool = False,
) -> TriageReport:
    """The full report: every layer's finding, the verdict, and the playbook's steps; with
    `nodes`, every node judged and every evidence line with its references (`-o json`)."""
    findings = _findings(d, complete=nodes)
    decision = _decide(d)
    target, ref = d.target, _pod_ref(d.target)
    unread = unread_of(d.unknowns, d.unread)
    remedy = _Remedy()
    if decision.failing is not None:
        at = [n for s in decision.mine for n in s.nodes]
        values = {
            "namespace": target.namespace,
            "pod": ref.pod or target.name,
            "resource": next(iter(gpu_requests(target.subject or {})), GPU),
            **({"node": at[0]} if at else {}),
            **({"operator_namespace": operator_namespace} if operator_namespace else {}),
            **_fault_values(decision.mine),
            **(stack_values or {}),
        }
        playbook = d.playbook
        vendor = _vendor(target, decision.mine)
        if vendor is not None:
            values.setdefault("vendor", vendor.name)
        key = vendor.key if vendor is not None else None
        steps, operator_steps = playbook.steps(
            decision.failing, codes_of(decision.mine), vendor_key=key, **values
        )
        checks = playbook.verification(decision.failing, vendor_key=key, **values)
        remedy = _Remedy(steps, operator_steps, checks)
    return TriageReport(
        data_age_note=_data_age(d.source),
        pod=ref,
        cluster=d.source.cluster_name,
        failing_layer=decision.failing,
        headline=decision.headline,
        findings=list(findings.values()),
        owner=decision.owner,
        remediation=remedy.steps + [_grant_step(u) for u in unread],
        operator_steps=remedy.operator_steps,
        verification=remedy.checks,
        generated_at=now or datetime.now(UTC),
        notes=notes,
        gpu_stack=gpu_stack or [],
        cause=decision.cause,
        answer=decision.answer,
        unknown_layers=_layers_of(d.unknowns),
        unread=unread,
        nodes=d.nodes() if nodes and d.nodes is not None else None,
    )


def _vendor(target: Target, signals: Sequence[Signal]) -> Vendor | None:
    """The accelerator vendor a report is about, for its vendor's steps: the one whose devices
    the pod asks for, else the one of the nodes the failing signals name; None for a pod
    that asks for no accelerator on nodes that have none (no vendor's steps then)."""
    asked = next(iter(gpu_requests(target.subject or {})), None)
    found = vendor_of(asked) if asked else None
    if found is not None:
        return found
    named = next((s.values.get("vendor") for s in signals if s.values.get("vendor")), None)
    return next((v for v in VENDORS if v.name == named), None)


def _grant_step(u: Unread) -> str:
    """What to do about a read that failed, for the unknown it left."""
    if u.grant:
        return (
            f"Grant {u.grant} to the identity GPU Triage reads the cluster as (the bot: its "
            "ClusterRole in the Helm chart), then ask again."
        )
    if u.fault == "not-in-snapshot":
        return f"Take the snapshot again with {u.resource} in it, then ask again."
    return f"Ask again once the Kubernetes API answers: {u.message}"


@dataclass(frozen=True, slots=True)
class _Remedy:
    steps: list[str] = field(default_factory=list)
    operator_steps: list[str] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)


def _pod_ref(target: Target) -> PodRef:
    pod = target.pod
    top = target.workloads[0] if target.workloads else None
    if top is not None:
        workload = WorkloadRef(kind=str(top.get("kind") or target.kind), name=name_of(top))
    else:
        workload = WorkloadRef(kind=target.kind, name=target.name)
    ref = PodRef(
        workload=shared_fields(workload),
        namespace=target.namespace,
        name=target.name,
        kind=target.kind,
        pod=name_of(pod) if pod is not None else None,
        node=(pod.get("spec") or {}).get("nodeName") if pod is not None else None,
        phase=(pod.get("status") or {}).get("phase") if pod is not None else None,
    )
    return shared_fields(ref)


def _fault_values(signals: Sequence[Signal]) -> dict[str, str]:
    """Playbook placeholders from the failing layer's signals: the component pod at fault and
    whatever the first signal that carries values fills."""
    out: dict[str, str] = {}
    at_fault = next((s.pod for s in signals if s.pod), "")
    if at_fault:
        out["component_namespace"], _, out["component_pod"] = at_fault.partition("/")
    out.update(next((s.values for s in signals if s.values), {}))
    return out
