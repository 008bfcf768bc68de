"""Signals: what each small check reports, before the root-cause rule turns them into findings.

A signal belongs to one layer, is blocking or a side note, and carries evidence split by
audience: `evidence` may be shown to the pod's tenant, `detail` only to operators.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from triage.cluster.source import ReadFailedError
from triage.model import Finding, Layer, Status


@dataclass(slots=True)
class Signal:
    layer: Layer
    code: str
    summary: str
    blocking: bool = True
    evidence: list[str] = field(default_factory=list)
    detail: list[str] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)
    pod: str = ""  # "namespace/name" of the GPU component pod at fault, if one is
    values: dict[str, str] = field(default_factory=dict)  # playbook placeholders it fills
    # Shared objects that block (ResourceQuota ns/name, ClusterQueue, a missing label): what
    # makes two workloads stuck for one cause in the fleet view.
    objects: list[str] = field(default_factory=list)


def owned(signals: list[Signal], index: int) -> Signal:
    """`signals[index]`, replaced by a copy of its own that the caller may change.

    Signals that an evaluation decides alone are shared by every triage of a sweep that uses
    it, so a check never changes a signal it did not make: it takes a copy first. Checks
    change a signal's summary, blocking and evidence; `nodes`, `values` and `objects` are
    never changed once made, and the copy shares them (a "pool full" signal names
    thousands of nodes)."""
    s = signals[index]
    signals[index] = copy = Signal(
        s.layer, s.code, s.summary, s.blocking, list(s.evidence), list(s.detail),
        s.nodes, s.pod, s.values, s.objects,
    )  # fmt: skip
    return copy


@dataclass
class Unknown:
    """A layer we could not inspect, and why (usually a permission to grant); `error` is the
    read that failed, when one did."""

    layer: Layer
    reason: str
    error: ReadFailedError | None = None


def _clip(lines: list[str], limit: int) -> list[str]:
    seen = list(dict.fromkeys(lines))  # de-duplicated, order kept
    if len(seen) <= limit:
        return seen
    return [*seen[: limit - 1], f"… and {len(seen) - limit + 1} more"]


def build_finding(
    layer: Layer,
    mine: list[Signal],
    unknowns: list[Unknown],
    *,
    ok_summary: str,
    skipped: str | None = None,
    limit: int = 12,
) -> Finding:
    """One finding per layer from that layer's signals (`mine`): fail if any blocking signal,
    else unknown, warn, ok or skipped."""
    blocking = [s for s in mine if s.blocking]
    side = [s for s in mine if not s.blocking]
    unknown = [u.reason for u in unknowns if u.layer == layer]
    if blocking:
        status = Status.FAIL
        summary = blocking[0].summary
        others = {s.code for s in blocking} - {blocking[0].code}
        if others:
            summary += f" (and {len(others)} more blocking signal(s))"
    elif unknown:
        status, summary = Status.UNKNOWN, f"could not check: {unknown[0]}"
    elif side:
        status, summary = Status.WARN, side[0].summary
    elif skipped:
        status, summary = Status.SKIPPED, skipped
    else:
        status, summary = Status.OK, ok_summary
    evidence: list[str] = []
    detail: list[str] = []
    for s in blocking:
        evidence.extend(s.evidence)
        detail.extend(s.detail)
    if blocking:
        evidence.extend(f"could not check: {u}" for u in unknown)
    for i, s in enumerate(side):
        if blocking:
            evidence.append(f"side finding (does not block this pod): {s.summary}")
        elif i > 0:
            evidence.append(s.summary)  # the first one is already the finding's summary
        if s.evidence:
            evidence.extend(s.evidence)
        if s.detail:
            detail.extend(s.detail)
    codes = [s.code for s in blocking] if blocking else [s.code for s in side]
    return Finding(
        layer=layer,
        status=status,
        summary=summary,
        evidence=_clip(evidence, limit),
        detail=_clip(detail, limit),
        codes=list(dict.fromkeys(codes)),  # the leading signal's first
    )
