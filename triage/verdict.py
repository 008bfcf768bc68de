"""Assembles the TriageReport from signals: one finding per layer, the verdict (the lowest
blocking layer), the owner route and the playbook's steps."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from triage.cluster.objects import name_of
from triage.cluster.quantities import gpu_requests, pod_requests
from triage.cluster.source import ClusterSource, ForbiddenError
from triage.config import EngineConfig
from triage.layers.scheduling.exclusions import wants_gpu
from triage.model import (
    LAYER_ORDER,
    Cause,
    Finding,
    Layer,
    OwnerRoute,
    PodRef,
    TriageReport,
    Verdict,
)
from triage.playbooks import Playbook
from triage.signals import Signal, Unknown, build_finding
from triage.target import Target

OK_SUMMARY = {
    Layer.DRIVER: "no driver or runtime problem on the nodes this pod can use",
    Layer.DEVICE_PLUGIN: "the nodes this pod can use advertise their GPUs",
    Layer.SCHEDULING: "the pod's placement constraints can be met",
    Layer.QUOTA: "no quota or queue holds the pod",
}


def _data_age(source: ClusterSource) -> str | None:
    """Why the data might not be the cluster as it is now: a lagging watch, or a snapshot."""
    stale = getattr(source, "staleness_note", None)
    if callable(stale):
        note = stale()
        return str(note) if note else None
    as_of = getattr(source, "as_of", None)
    if isinstance(as_of, datetime):
        return f"cluster state as of {as_of:%Y-%m-%d %H:%M} UTC (snapshot)"
    return None


def _findings(
    *,
    target: Target,
    signals: list[Signal],
    unknowns: list[Unknown],
    config: EngineConfig,
    ok_summaries: dict[Layer, str],
    layers: tuple[Layer, ...] = LAYER_ORDER,
) -> dict[Layer, Finding]:
    """One finding per layer in `layers`."""
    subject = target.subject
    gpu = subject is not None and wants_gpu(subject, pod_requests(subject))
    by_layer: dict[Layer, list[Signal]] = {layer: [] for layer in LAYER_ORDER}
    for s in signals:
        by_layer[s.layer].append(s)
    return {
        layer: build_finding(
            layer,
            by_layer[layer],
            unknowns,
            ok_summary=ok_summaries.get(layer, OK_SUMMARY[layer]),
            skipped=(
                "the pod requests no NVIDIA resources"
                if not gpu and layer in (Layer.DRIVER, Layer.DEVICE_PLUGIN)
                else None
            ),
            limit=config.max_evidence,
        )
        for layer in layers
    }


def _failing(signals: list[Signal]) -> Layer | None:
    """The root-cause rule's verdict: the lowest layer with a blocking signal."""
    return min((s.layer for s in signals if s.blocking), key=lambda la: la.rank, default=None)


@dataclass(frozen=True, slots=True)
class _Decision:
    """The verdict of a triage: its failing layer (None when nothing blocks), headline, owner
    and cause, and the failing layer's finding and blocking signals they rest on."""

    failing: Layer | None
    headline: str
    owner: OwnerRoute | None = None
    cause: Cause | None = None
    finding: Finding | None = None
    mine: list[Signal] = field(default_factory=list)


def _decide(
    *,
    source: ClusterSource,
    target: Target,
    signals: list[Signal],
    findings: dict[Layer, Finding],
    headline: str | None,
    playbook: Playbook,
    node_labels: Callable[[str], dict[str, str]],
) -> _Decision:
    failing = _failing(signals)
    if failing is None:
        return _Decision(
            None, headline or f"{target.kind} {target.name}: nothing blocks it at any layer"
        )
    finding = findings[failing]
    mine = [s for s in signals if s.blocking and s.layer == failing]
    nodes = [n for s in mine for n in s.nodes]
    try:
        ns_obj = source.get("Namespace", target.namespace)
    except ForbiddenError:
        ns_obj = None
    owner = playbook.route(
        failing,
        namespace=ns_obj,
        node_labels=[node_labels(n) for n in nodes[:5]],
        codes=finding.codes[:1],
    )
    cause = Cause(
        layer=failing,
        code=finding.codes[0],
        nodes=sorted(set(nodes)),
        objects=list(dict.fromkeys(o for s in mine for o in s.objects)),
    )
    return _Decision(failing, f"{failing.value}: {finding.summary}", owner, cause, finding, mine)


def judge(
    *,
    source: ClusterSource,
    target: Target,
    signals: list[Signal],
    unknowns: list[Unknown],
    headline: str | None,
    playbook: Playbook,
    config: EngineConfig,
    node_labels: Callable[[str], dict[str, str]],
    ok_summaries: dict[Layer, str],
) -> Verdict:
    """The verdict alone, as `assemble` would give it: no evidence, steps or other layers'
    findings (for the fleet view, which triages thousands of workloads a sweep)."""
    failing = _failing(signals)
    findings = (
        {}
        if failing is None
        else _findings(
            target=target,
            signals=signals,
            unknowns=unknowns,
            config=config,
            ok_summaries=ok_summaries,
            layers=(failing,),
        )
    )
    decision = _decide(
        source=source,
        target=target,
        signals=signals,
        findings=findings,
        headline=headline,
        playbook=playbook,
        node_labels=node_labels,
    )
    return Verdict(
        cluster=source.cluster_name,
        pod=_pod_ref(target),
        failing_layer=decision.failing,
        headline=decision.headline,
        cause=decision.cause,
        owner=decision.owner,
    )


def assemble(
    *,
    source: ClusterSource,
    target: Target,
    signals: list[Signal],
    unknowns: list[Unknown],
    notes: list[str],
    headline: str | None,
    playbook: Playbook,
    config: EngineConfig,
    node_labels: Callable[[str], dict[str, str]],
    ok_summaries: dict[Layer, str],
    now: datetime | None,
    gpu_stack: list[str] | None = None,
    operator_namespace: str | None = None,
    stack_values: dict[str, str] | None = None,
) -> TriageReport:
    findings = _findings(
        target=target,
        signals=signals,
        unknowns=unknowns,
        config=config,
        ok_summaries=ok_summaries,
    )
    decision = _decide(
        source=source,
        target=target,
        signals=signals,
        findings=findings,
        headline=headline,
        playbook=playbook,
        node_labels=node_labels,
    )
    ref = _pod_ref(target)
    remedy = _Remedy()
    if decision.failing is not None and decision.finding is not None:
        nodes = [n for s in decision.mine for n in s.nodes]
        values = {
            "namespace": target.namespace,
            "pod": ref.pod or target.name,
            "resource": next(iter(gpu_requests(target.subject or {})), "nvidia.com/gpu"),
            **({"node": nodes[0]} if nodes else {}),
            **({"operator_namespace": operator_namespace} if operator_namespace else {}),
            **_fault_values(decision.mine),
            **(stack_values or {}),
        }
        steps, operator_steps = playbook.steps(decision.failing, decision.finding.codes, **values)
        remedy = _Remedy(steps, operator_steps, playbook.verification(decision.failing, **values))
    return TriageReport(
        data_age_note=_data_age(source),
        pod=ref,
        cluster=source.cluster_name,
        failing_layer=decision.failing,
        headline=decision.headline,
        findings=list(findings.values()),
        owner=decision.owner,
        remediation=remedy.steps,
        operator_steps=remedy.operator_steps,
        verification=remedy.checks,
        generated_at=now or datetime.now(UTC),
        notes=notes,
        gpu_stack=gpu_stack or [],
        cause=decision.cause,
    )


@dataclass(frozen=True, slots=True)
class _Remedy:
    steps: list[str] = field(default_factory=list)
    operator_steps: list[str] = field(default_factory=list)
    checks: list[str] = field(default_factory=list)


def _pod_ref(target: Target) -> PodRef:
    pod = target.pod
    return PodRef(
        namespace=target.namespace,
        name=target.name,
        kind=target.kind,
        pod=name_of(pod) if pod is not None else None,
        node=(pod.get("spec") or {}).get("nodeName") if pod is not None else None,
        phase=(pod.get("status") or {}).get("phase") if pod is not None else None,
    )


def _fault_values(signals: list[Signal]) -> dict[str, str]:
    """Playbook placeholders from the failing layer's signals: the component pod at fault and
    whatever the first signal that carries values fills."""
    out: dict[str, str] = {}
    at_fault = next((s.pod for s in signals if s.pod), "")
    if at_fault:
        out["component_namespace"], _, out["component_pod"] = at_fault.partition("/")
    out.update(next((s.values for s in signals if s.values), {}))
    return out
