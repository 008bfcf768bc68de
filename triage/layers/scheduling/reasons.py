"""Turns the node-by-node evaluation into layer signals: the heart of the root-cause rule.

- Nodes the pod could never use (selector, taint, no GPU, too small) explain nothing about
  lower layers: their driver or plugin problems become side findings.
- If some node the pod could use is usable right now, no lower layer blocks the pod either.
- Otherwise each usable-in-principle node is blocked at its lowest layer, and every such layer
  is reported as failing; the verdict is the lowest of them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from functools import partial

from triage.cluster.events import Event
from triage.cluster.objects import Obj
from triage.cluster.quantities import asks, fmt_amount, is_extended
from triage.layers.node_fault import node_fault
from triage.layers.scheduling.autoscaler import NO_READS, ScalingReads, autoscaler_signals
from triage.layers.scheduling.blocks import NodeFit
from triage.layers.scheduling.filters.resources_fit import INSUFFICIENT
from triage.layers.scheduling.no_candidate import no_candidate_signal
from triage.layers.scheduling.placement import Derived, Evaluation, Placement
from triage.layers.scheduling.registry import AFTER_FIT_CODES, MODELLED, SUMMARIES
from triage.layers.scheduling.scheduler import latest_failed_scheduling, parse
from triage.model import Layer
from triage.signals import JOINING, WAITING, Signal
from triage.vendors import NVIDIA

# What blocks nodes below the scheduler's filters (their driver, their device plugin), by code.
_NODE_SUMMARY = {
    "driver.node-not-ready": "{n} of {c} node(s) the pod can use are not Ready",
    "driver.pod-missing": "{n} of {c} node(s) the pod can use have no {vendor} driver pod",
    "driver.pod-failing": "{n} of {c} node(s) the pod can use cannot see their {devices}: the {vendor} driver pod is failing",
    "driver.toolkit-failing": "{n} of {c} node(s) the pod can use have a failing {vendor} container toolkit",
    "driver.validation-failed": "{n} of {c} node(s) the pod can use fail the operator's driver validation",
    "driver.component-disabled": "{n} of {c} node(s) the pod can use have their driver or container toolkit switched off by label or policy, and no driver is loaded",
    "driver.upgrade-in-progress": "{n} of {c} node(s) the pod can use are cordoned by the GPU Operator for a {vendor} driver upgrade",
    "driver.not-installed": "{n} of {c} node(s) the pod can use have no {vendor} driver installed",
    "driver.upgrade-failed": "{n} of {c} node(s) the pod can use failed their {vendor} driver upgrade and stay cordoned",
    "device-plugin.not-registered": "{n} of {c} node(s) the pod can use run a device plugin that is not registered with kubelet (0 {devices} offered)",
    "driver.mig-config-failed": "{n} of {c} node(s) the pod can use failed their MIG reconfiguration (MIG manager)",
    "device-plugin.pod-missing": "{n} of {c} node(s) the pod can use have no device-plugin pod although one should run there",
    "device-plugin.component-disabled": "{n} of {c} node(s) the pod can use have their device plugin switched off by label or policy",
    "device-plugin.paused": "{n} of {c} node(s) the pod can use have their device plugin paused",
    "device-plugin.host-plugin": "{n} of {c} node(s) the pod can use advertise no {devices} from the device plugin that runs on the host",
    "device-plugin.not-deployed": "{n} of {c} node(s) the pod can use run no device plugin: no device-plugin DaemonSet targets them",
    "device-plugin.not-installed": "{n} of {c} node(s) the pod can use run no device plugin: none is installed for them",
    "device-plugin.gfd-down": "{n} of {c} node(s) the pod could use lack the GPU labels it selects because GPU feature discovery is not running there",
    "device-plugin.no-gpu-resource": "{n} of {c} node(s) the pod can use advertise no {devices} to kubelet (device plugin)",
    "device-plugin.pod-failing": "{n} of {c} node(s) the pod can use have a failing device plugin",
    "device-plugin.mig-only": "{n} of {c} node(s) the pod can use expose only MIG slices, but the pod asks for whole GPUs",
    "device-plugin.mig-profile-missing": "{n} of {c} node(s) the pod can use are not partitioned into the MIG profile the pod asks for",
    "device-plugin.unhealthy-devices": "{n} of {c} node(s) the pod can use lost {devices} to unhealthy devices (allocatable < capacity)",
    "device-plugin.resource-renamed": "{n} of {c} node(s) the pod can use advertise the GPU under another resource name",
    "device-plugin.mig-reconfiguring": "{n} of {c} node(s) the pod can use are being repartitioned (MIG reconfiguration in progress)",
}  # fmt: skip
_SUMMARY = {**_NODE_SUMMARY, **SUMMARIES}
AFTER_FIT = AFTER_FIT_CODES

SHOWN = 10  # nodes described per reason; the rest are counted (listed in a complete report)


def _rest_of(group: list[NodeFit]) -> Callable[[], list[str]]:
    """The nodes past the first SHOWN described, when a complete report asks for them."""
    return lambda: [f.describe()[0] for f in group[SHOWN:]]


def _rest(nodes: Evaluation, shown: list[NodeFit], n: int) -> Callable[[], list[str]]:
    """The same for the nodes short of room: only the first SHOWN fits were made."""
    return lambda: [f.describe()[0] for f in nodes.short_fits(n)[len(shown) :]]


# Within one layer, the more specific explanation leads the finding.
_FIRST = (
    "device-plugin.mig-reconfiguring",
    "driver.mig-config-failed",
    "driver.node-not-ready",
)


def scheduling_signals(
    *,
    pod: Obj,
    placement: Placement,
    nodes: Evaluation,
    gpu: dict[str, int],
    events: list[Event],
    now: datetime | None = None,
    reads: ScalingReads = NO_READS,
    verdict_only: bool = False,
) -> list[Signal]:
    """The scheduling layer's signals for a pod without a node. `verdict_only` leaves out
    what a verdict never reads: the side findings on nodes the pod could never use (which
    never block, and a sweep would carry one per broken node through every triage) and the
    evidence lines made from the pod and its events (what it asks, the scheduler's words,
    why preemption will not help), which a sweep would write for every workload."""
    usable, joining = nodes.usable, nodes.joining
    blocked_now = not usable and not joining
    signals = _signals(
        pod=pod, placement=placement, nodes=nodes, gpu=gpu, events=events,
        verdict_only=verdict_only,
    )  # fmt: skip
    if not blocked_now or (pod.get("spec") or {}).get("nodeName"):
        return signals
    # Nothing can take the pod now: is a node on its way, or why will none come? A node on
    # its way is the answer; an autoscaler that cannot add one is the cause when nodes that
    # match the pod are only full (with no such node, the constraint is the more exact cause).
    at = next(
        (i for i, s in enumerate(signals) if s.blocking and s.code == "scheduling.insufficient"),
        None,
    )
    first = None if at is None else signals[at]
    if first is not None and at is not None and not verdict_only:
        signals[at] = first.with_evidence(then=_preemption_notes(pod))
    auto = autoscaler_signals(
        pod,
        events,
        now=now or datetime.now(UTC),
        reads=reads,
        silence=first is not None,  # the pod waits for room
    )
    if auto and reads.dated is not None:
        reads.dated()
    waiting = [s for s in auto if s.code in WAITING]
    stuck = [s for s in auto if s.code not in WAITING]
    if (
        waiting
        and nodes.candidates
        and all(s.layer == Layer.SCHEDULING for s in signals if s.blocking)
    ):
        # Room is being made (a node launching, victims leaving): the pod waits, unblocked.
        waiting = [replace(s, blocking=False) for s in waiting]
        signals = [replace(s, blocking=False) for s in signals]
    if nodes.candidates:
        return [*waiting, *stuck, *signals]
    return [*waiting, *signals, *stuck]


def _preemption_notes(pod: Obj) -> list[str]:
    """Why preemption will not make room for a pod short of resources, when the pod says."""
    spec = pod.get("spec") or {}
    if spec.get("preemptionPolicy") == "Never":
        return ["the pod's preemptionPolicy is Never: it waits rather than evict other pods"]
    if not spec.get("priority"):
        return [
            "the pod has priority 0"
            + (
                f" (PriorityClass {spec['priorityClassName']})"
                if spec.get("priorityClassName")
                else " (no PriorityClass)"
            )
            + ": preemption can only evict pods of lower (negative) priority for it"
        ]
    return []


def _signals(
    *,
    pod: Obj,
    placement: Placement,
    nodes: Evaluation,
    gpu: dict[str, int],
    events: list[Event],
    verdict_only: bool,
) -> list[Signal]:
    """The scheduling signals from the evaluation, lowest layer first: candidates blocked at
    some layer, nodes joining, validator contradictions, side findings on nodes the pod could
    never use; then why no node is a candidate, or why the scheduler still refuses usable ones.
    (`verdict_only`: see `scheduling_signals`.)"""
    blocked_now = not nodes.usable and not nodes.joining
    sides = not verdict_only
    sched = latest_failed_scheduling(pod, events)
    sched_line = f"scheduler ({sched[1]}): {sched[0]}" if sched and sides else None
    signals = node_signals(pod=pod, placement=placement, nodes=nodes, gpu=gpu, sides=sides)
    derived = nodes.derived
    for i in derived.sized if sides else ():
        at = derived.at(i, sides=sides)
        signals[at] = _with_asks(signals[at], pod, placement, derived)
    if not nodes.candidates:
        if sched_line:  # the last signal says why no node is a candidate
            signals[-1] = signals[-1].with_evidence(first=[sched_line])
        return signals
    usable = _usable_signals(pod, nodes.usable, sched, sched_line)
    if sched_line and blocked_now:
        # the lowest blocking signal: among the evaluation's (found once), then these
        lowest = derived.lowest_blocking
        if lowest is not None:
            lowest = derived.at(lowest, sides=sides)
        for i, s in enumerate(usable, start=len(signals)):
            if s.blocking and (lowest is None or s.layer.rank < signals[lowest].layer.rank):
                lowest = i
        signals += usable
        if lowest is not None:
            signals[lowest] = signals[lowest].with_evidence(first=[sched_line])
        return signals
    return signals + usable


# Signals about the pod's size: they say what it asks, and which container asks it.
_SIZED = frozenset({INSUFFICIENT, "scheduling.request-too-large",
                    "scheduling.resource-not-offered", "scheduling.no-mig-profile"})  # fmt: skip


def _with_asks(signal: Signal, pod: Obj, placement: Placement, derived: Derived) -> Signal:
    """A signal about the pod's size, with what the pod asks and what drives each request
    (evaluations are shared by pods of one shape, whose containers may differ): made once
    per signal and line for the triages sharing the evaluation (`derived`)."""
    if signal.code not in _SIZED:
        return signal
    requests = placement.requests
    devices = {r: v for r, v in requests.items() if is_extended(r)}
    wanted = devices or {r: v for r, v in requests.items() if r != "pods"}
    if not wanted:
        return signal
    line = asks(pod, wanted)
    kept = derived.asked
    found = kept.get((id(signal), line))
    if found is None or found[0] is not signal:
        if len(kept) >= 256:
            kept.clear()
        found = kept[(id(signal), line)] = (signal, signal.with_evidence(then=[line]))
    return found[1]


def node_signals(
    *, pod: Obj, placement: Placement, nodes: Evaluation, gpu: dict[str, int], sides: bool = True
) -> list[Signal]:
    """What the evaluation alone decides, the same for every pod it was made for (pods of one
    shape share it in a sweep): computed once per evaluation. The signals are shared (and
    immutable); the list is the caller's, without the side findings when `sides` is False
    (`Derived.at` maps an index of the whole list into it)."""
    derived = nodes.derived
    made = derived.node_signals
    if made is None:
        blocked_now = not nodes.usable and not nodes.joining
        made = _blocked_signals(nodes, blocked_now=blocked_now)
        made += _joining_signals(nodes)
        side = _side_signals(nodes, placement)
        derived.sides = (len(made), len(made) + len(side))
        made += side
        if not nodes.candidates:
            made.append(no_candidate_signal(pod, placement, nodes, gpu))
        derived.node_signals = made
        derived.sized = [i for i, s in enumerate(made) if s.code in _SIZED]
        derived.lowest_blocking = min(
            (i for i, s in enumerate(made) if s.blocking),
            key=lambda i: made[i].layer.rank,
            default=None,
        )
    if sides:
        return list(made)
    start, end = derived.sides
    return made[:start] + made[end:]


def evaluation_digest(placement: Placement, nodes: Evaluation) -> tuple[object, ...]:
    """What the verdicts of the triages sharing an evaluation take from it: the signals it
    decides alone that block (the failing layer, the headline, the nodes and objects of the
    cause), how many nodes are candidates and usable, whether any is joining. Side findings
    and evidence are left out: a sweep keeps verdicts, not reports (a drill-in triages
    afresh). Made after `node_signals` ran on it, once per evaluation."""
    found = nodes.derived.digest
    if found is None:
        made = nodes.derived.node_signals or []
        found = nodes.derived.digest = (
            tuple(
                (s.layer, s.code, s.summary, tuple(s.nodes), tuple(s.objects))
                for s in made
                if s.blocking
            ),
            len(nodes.usable),
            nodes.candidates,
            bool(nodes.joining),
        )
    return found


def _blocked_signals(nodes: Evaluation, *, blocked_now: bool) -> list[Signal]:
    """Candidates blocked at some layer: one signal per (layer, code), with per-node evidence.
    With a node free now, other candidates being full or cordoned explains nothing."""
    usable = nodes.usable
    signals: list[Signal] = []
    by_code: dict[str, list[NodeFit]] = defaultdict(list)
    for f in nodes.blocked:
        if blocked_now or f.layer != Layer.SCHEDULING:
            by_code[f.code].append(f)
    groups: list[tuple[Layer, str, int, list[NodeFit], list[str]]] = [
        (g[0].layer, code, len(g), g, [f.node for f in g])
        for code, g in by_code.items()
        if g[0].layer is not None
    ]
    shown: list[NodeFit] = []
    if blocked_now and nodes.short:
        shown = nodes.short_fits(SHOWN)
        names = list(nodes.short_names())
        groups.append((Layer.SCHEDULING, "scheduling.insufficient", len(names), shown, names))
    for layer, code, n, group, names in sorted(
        groups, key=lambda g: (g[0].rank, g[1] not in _FIRST, g[1] not in AFTER_FIT, -g[2], g[1])
    ):
        template = _SUMMARY.get(code, "{n} of {c} node(s) the pod can use are blocked")
        values = dict(next((f.values for f in group if f.values), {}))
        summary = template.format_map({"vendor": NVIDIA.name, "devices": "GPUs", **values,
                                        "n": n, "c": nodes.candidates})  # fmt: skip
        scattered = _fragmented(nodes) if code == INSUFFICIENT else []
        if scattered:  # enough free in all, not on any one node: say both figures
            summary += f": {scattered[0]}"
        if not blocked_now:
            summary += f" (but {len(usable)} other node(s) can take it)"
        described = [f.describe() for f in group[:SHOWN]]
        evidence = [*scattered[1:], *(text for text, _ in described)]
        more = {}
        if n > SHOWN:
            counted = f"… and {n - SHOWN} more node(s) with the same reason"
            evidence.append(counted)
            more[counted] = _rest(nodes, group, n) if group is shown else _rest_of(group)
        if layer == Layer.DRIVER and any(f.gfd_labels_missing for f in group):
            evidence.append(
                "GPU feature labels are missing on these nodes because the driver is down"
            )
        signals.append(
            Signal(
                layer,
                code,
                summary,
                blocking=blocked_now,
                evidence=evidence,
                detail=[d for _, detail in described for d in detail],
                nodes=names,
                pod=next((f.pod for f in group if f.pod), ""),
                values=values,
                more=more,
            )
        )

    return signals


# Past this many nodes short of room, fragmentation is not worked out: a warm triage stays
# within a few milliseconds at 5,000 nodes (a full pool of thousands of nodes is full; its
# per-node figures are the evidence).
FRAGMENTATION_NODES = 256


def _fragmented(nodes: Evaluation) -> list[str]:
    """Resources the nodes short of room have enough of in all but not on any one of them:
    "16 nvidia.com/gpu free across 5 eligible nodes, at most 4 on one; the pod asks 8"."""
    asked = [(r, w) for r, w in nodes.requests.items() if w > 1]  # one unit cannot split
    if not asked or len(nodes.short) > FRAGMENTATION_NODES:
        return []
    total = dict.fromkeys(nodes.requests, 0)
    most, count = total.copy(), total.copy()
    for health, use in zip(nodes.short, nodes.short_usage, strict=True):
        alloc, used = health.allocatable_all, use.requests if use is not None else {}
        for res, _ in asked:
            free = alloc.get(res, 0) - used.get(res, 0)
            if free > 0:
                total[res] += free
                count[res] += 1
                most[res] = max(most[res], free)
    out = []
    for res, want in asked:
        if total[res] >= want > most[res]:
            amount = partial(fmt_amount, res)
            out.append(
                f"{amount(total[res])} {res} free across {count[res]} eligible node(s), at "
                f"most {amount(most[res])} on one; the pod asks {amount(want)}"
            )
    return out


def _joining_signals(nodes: Evaluation) -> list[Signal]:
    """Nodes whose GPUs are expected within minutes, and nodes whose validator disagrees."""
    usable, joining = nodes.usable, nodes.joining
    signals: list[Signal] = []
    if joining and not usable:
        signals.append(
            Signal(
                Layer.DEVICE_PLUGIN,
                JOINING,
                str(joining[0].joining),
                blocking=False,
                evidence=[str(f.joining) for f in joining[1:]],
                nodes=[f.node for f in joining],
            )
        )
    for h in nodes.contradictions:
        signals.append(
            Signal(
                Layer.DRIVER,
                "driver.validator-contradiction",
                h.contradiction[0],
                blocking=False,
                evidence=[
                    f"driver: {h.driver.text or 'ok'}",
                    f"device plugin: {h.plugin.text or 'ok'}",
                ],
                detail=h.driver.detail + h.plugin.detail,
                nodes=[h.name],
            )
        )

    return signals


def _side_signals(nodes: Evaluation, placement: Placement) -> list[Signal]:
    """Nodes the pod could never use: their lower-layer problems are side findings (of no
    interest to a pod that needs no GPU at all)."""
    signals: list[Signal] = []
    for category, h in nodes.side if placement.gpu else ():
        fault = node_fault(h)  # the layer verify-node and the fleet view name for it too
        if fault is None:
            continue
        layer, verdict = fault.layer, fault.verdict
        signals.append(
            Signal(
                layer,
                verdict.code,
                f"{verdict.text} (this pod cannot use that node anyway: {category})",
                blocking=False,
                detail=verdict.detail,
                nodes=[h.name],
            )
        )
    return signals


def _usable_signals(
    pod: Obj, usable: list[str], sched: tuple[str, str] | None, sched_line: str | None
) -> list[Signal]:
    """Usable nodes exist: say so, and trust the scheduler when it still says no."""
    signals: list[Signal] = []
    gates = [g.get("name") for g in (pod.get("spec") or {}).get("schedulingGates") or []]
    other_gates = [g for g in gates if g != "kueue.x-k8s.io/admission"]
    if usable and other_gates:
        signals.append(
            Signal(
                Layer.SCHEDULING,
                "scheduling.gated",
                f"the pod has scheduling gates {', '.join(map(str, other_gates))}: the scheduler ignores it until they are removed",
            )
        )
    elif usable and sched is not None and not gates:
        parsed = parse(sched[0])
        unmodelled = sorted((parsed.categories() if parsed else {"other"}) - MODELLED)
        why = (
            f"a constraint this triage does not evaluate applies ({', '.join(unmodelled)})"
            if unmodelled
            else "the scheduler's view may be newer than this data (pods just started or finished)"
        )
        signals.append(
            Signal(
                Layer.SCHEDULING,
                "scheduling.scheduler-reported",
                f"the scheduler cannot place the pod although {len(usable)} node(s) look usable: {why}",
                evidence=[sched_line or ""],
            )
        )
    return signals


def placement_summary(nodes: Evaluation) -> str | None:
    """The scheduling layer's 'ok' line when some node can take the pod now."""
    usable = nodes.usable
    if not usable:
        return None
    names = ", ".join(usable[:3]) + (" …" if len(usable) > 3 else "")
    return f"{len(usable)} of {nodes.candidates} node(s) matching the pod can take it now ({names})"
