"""Signals: what each small check reports, before the root-cause rule turns them into findings.

A signal belongs to one layer, is blocking or a side note, and carries evidence split by
audience: `evidence` may be shown to the pod's tenant, `detail` only to operators.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from triage.cluster.source import ReadFailedError
from triage.model import Finding, Layer, ObjectRef, Status

# Codes the root-cause rule itself knows, beside those of the checks that make them.
REPORTED = "scheduling.scheduler-reported"  # the scheduler's words, when nothing explains them
JOINING = "device-plugin.node-joining"  # a node still coming up: its GPUs are on their way
# Signals that mean "room is on its way": the pod waits, nothing is broken.
WAITING = frozenset({"scheduling.scale-up-in-progress", "scheduling.preempting"})


_NONE: Mapping[str, object] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Signal:
    """What one check found. Immutable: signals an evaluation decides alone are shared by
    every triage of a sweep that uses it, so a check that needs another version of one makes
    it with `dataclasses.replace` (or `with_evidence`); its lists are tuples."""

    layer: Layer
    code: str
    summary: str
    blocking: bool = True
    evidence: Sequence[str] = ()
    detail: Sequence[str] = ()
    nodes: Sequence[str] = ()  # a "pool full" signal names thousands: never copied
    pod: str = ""  # "namespace/name" of the GPU component pod at fault, if one is
    values: Mapping[str, str] = field(default_factory=dict)  # playbook placeholders it fills
    # Shared objects that block (ResourceQuota ns/name, ClusterQueue, a missing label): what
    # makes two workloads stuck for one cause in the fleet view.
    objects: Sequence[str] = ()
    # References a check knows beside what `triage.references` reads from the sentences:
    # evidence line → the objects it names (`-o json` shows them first).
    refs: Mapping[str, Sequence[ObjectRef]] = field(default_factory=dict)
    # A line that counts what the evidence leaves out ("… and 8 more node(s)") → the lines
    # it stands for, made only for a complete report (`-o json|yaml|wide`): never cut short.
    more: Mapping[str, Callable[[], Sequence[str]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name, value in (("evidence", self.evidence), ("detail", self.detail),
                            ("nodes", self.nodes), ("objects", self.objects)):  # fmt: skip
            if type(value) is not tuple:
                object.__setattr__(self, name, tuple(value))
        for name, mapping in (("values", self.values), ("refs", self.refs), ("more", self.more)):
            if type(mapping) is not MappingProxyType:
                object.__setattr__(
                    self, name, MappingProxyType(dict(mapping)) if mapping else _NONE
                )

    def with_evidence(self, *, first: Sequence[str] = (), then: Sequence[str] = ()) -> Signal:
        """The signal with `first` before its evidence and `then` after it. (Copied slot by
        slot: its other fields are already in their final form, and a sweep makes one such
        copy or two per triage, where `dataclasses.replace` costs twice as much.)"""
        new = object.__new__(Signal)
        for name in _SLOTS:
            object.__setattr__(new, name, getattr(self, name))
        object.__setattr__(new, "evidence", (*first, *self.evidence, *then))
        return new


_SLOTS = Signal.__slots__


@dataclass
class Unknown:
    """A layer we could not inspect, and why (usually a permission to grant); `error` is the
    read that failed, when one did."""

    layer: Layer
    reason: str
    error: ReadFailedError | None = None


def _clip(lines: list[str], limit: int | None) -> list[str]:
    seen = list(dict.fromkeys(lines))  # de-duplicated, order kept
    if limit is None or len(seen) <= limit:
        return seen
    return [*seen[: limit - 1], f"… and {len(seen) - limit + 1} more"]


def _complete(s: Signal) -> Signal:
    """`s` with each "… N more" line replaced by the lines it counts."""
    if not s.more:
        return s
    lines: list[str] = []
    for line in s.evidence:
        lines.extend(s.more[line]() if line in s.more else (line,))
    return replace(s, evidence=tuple(lines), more={})


def signal_refs(signals: Sequence[Signal]) -> dict[str, Sequence[ObjectRef]]:
    """Every evidence line's references that the `signals` give."""
    out: dict[str, Sequence[ObjectRef]] = {}
    for s in signals:
        out.update(s.refs)
    return out


def build_finding(
    layer: Layer,
    mine: list[Signal],
    unknowns: list[Unknown],
    *,
    ok_summary: str,
    skipped: str | None = None,
    limit: int | None = 12,
) -> Finding:
    """One finding per layer from that layer's signals (`mine`): fail if any blocking signal,
    else unknown, warn, ok or skipped. `limit` None: complete, every line a check counted
    instead of listing (`Signal.more`) listed."""
    if limit is None:
        mine = [_complete(s) for s in mine]
    blocking = [s for s in mine if s.blocking]
    side = [s for s in mine if not s.blocking]
    unknown = [u.reason for u in unknowns if u.layer == layer]
    if blocking:
        status = Status.FAIL
        summary = failing_summary(blocking)
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
    codes = codes_of(blocking or side)
    return Finding(
        layer=layer,
        status=status,
        summary=summary,
        evidence=_clip(evidence, limit),
        detail=_clip(detail, limit),
        codes=codes,
    )


def failing_summary(blocking: Sequence[Signal]) -> str:
    """A failing layer's summary: its leading blocking signal's, with how many other kinds of
    blocking signal it has."""
    summary = blocking[0].summary
    others = {s.code for s in blocking} - {blocking[0].code}
    if others:
        summary += f" (and {len(others)} more blocking signal(s))"
    return summary


def codes_of(signals: Sequence[Signal]) -> list[str]:
    """The signals' codes, each once, the leading signal's first."""
    return list(dict.fromkeys(s.code for s in signals))
