"""When no node is a candidate for the pod: which exclusion is the cause (nodes that pass the
pod's own constraints but cannot fit it decide; a constraint is the cause only when no node
passes it), the nearest miss, and the headline that names it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from functools import partial

from triage.cluster.objects import Obj, labels
from triage.cluster.quantities import fmt_amount, gpu_requests, is_extended
from triage.layers.node import NodeHealth
from triage.layers.scheduling import dra
from triage.layers.scheduling.filters import resources_fit
from triage.layers.scheduling.placement import Evaluation, Placement
from triage.layers.scheduling.registry import EXCLUSION_CODES
from triage.model import Layer
from triage.signals import Signal
from triage.vendors import vendor_of

EXCLUSION_CODE = EXCLUSION_CODES

# Exclusions of nodes that pass the pod's own selector, affinity and tolerations: what they
# lack is size or kind of device (the fit's exclusions, and DRA's), and they, not the
# constraint-excluded nodes, are the cause.
FIT_CATEGORIES = frozenset({*resources_fit.PLUGIN.exclusion_codes, *dra.PLUGIN.exclusion_codes})


def no_candidate_signal(
    pod: Obj, placement: Placement, nodes: Evaluation, gpu: dict[str, int]
) -> Signal:
    """No candidate at all. Nodes that pass the pod's own constraints (selector, affinity,
    tolerations) but cannot fit it decide; the nodes those constraints exclude are context.
    Only when no node passes them is a constraint itself the cause."""
    counts: Counter[str] = Counter()
    gpu_counts: Counter[str] = Counter()
    for (category, is_gpu), pool in nodes.excluded.items():
        counts[category] += len(pool)
        if is_gpu:
            gpu_counts[category] += len(pool)
    fitting = Counter({c: n for c, n in counts.items() if c in FIT_CATEGORIES})
    if fitting:
        top = fitting.most_common(1)[0][0]
    elif not nodes.total or (gpu and not gpu_counts):
        top = ""
    else:
        top = (gpu_counts or counts).most_common(1)[0][0]
    code = exclusion_code(top) if nodes.total else NO_NODES
    parts = [f"{n} {cat}" for cat, n in counts.most_common()]
    evidence = [f"0/{nodes.total} nodes can take the pod: " + ", ".join(parts)] if parts else []
    more: dict[str, Callable[[], list[str]]] = {}  # the nodes counted, for a complete report
    pools = sorted(
        nodes.excluded.items(),
        key=lambda kv: (kv[0][0] not in fitting, kv[0][0] != top, kv[0][1] != bool(gpu)),
    )
    for (category, is_gpu), pool in pools:
        if not fitting and placement.gpu and gpu_counts and not is_gpu:
            continue  # GPU nodes make the examples when there are any
        # Constraint-excluded nodes are context when others pass: one example each.
        examples = pool[:1] if fitting and category not in fitting else pool[:3]
        evidence.extend(placement.exclusion_text(category, n, h) for n, h in examples)
        if len(pool) > len(examples):
            counted = f"… {len(pool) - len(examples)} more node(s): {category}"
            evidence.append(counted)
            more[counted] = partial(_listed, placement, category, pool[len(examples) :])
    missing = _unmatched_labels(pod, nodes)
    absent = _not_offered(placement, nodes, fitting) if code == NOT_OFFERED else []
    summary = no_candidate_summary(
        code, _wanted(placement.requests, gpu), missing=missing, absent=absent
    )
    if fitting:  # name the nearest miss: the node that passes the constraints
        (near, health), category = next(
            (pool[0], cat) for (cat, _), pool in pools if cat == top and pool
        )
        miss = placement.exclusion_text(category, near, health).removeprefix("node ")
        summary += f"; {miss}"
    return Signal(
        Layer.SCHEDULING, code, summary, evidence=evidence,
        objects=[f"label {m}" for m in missing] or _constraint(code, pod),
        values={"resource": absent[0]} if absent else {}, more=more,
    )  # fmt: skip


def _listed(
    placement: Placement, category: str, pool: Sequence[tuple[Obj, NodeHealth]]
) -> list[str]:
    return [placement.exclusion_text(category, n, h) for n, h in pool]


NO_NODES = "scheduling.no-nodes"
NOT_OFFERED = resources_fit.PLUGIN.exclusion_codes[resources_fit.NOT_OFFERED]


def _wanted(requests: Mapping[str, int], gpu: dict[str, int]) -> dict[str, int]:
    """What a headline says the pod asks for: its accelerators and other devices (extended
    resources: RDMA, SR-IOV, FPGAs), else its CPU, memory and storage."""
    devices = {r: v for r, v in requests.items() if is_extended(r)}
    if gpu or devices:
        return {**gpu, **devices}
    return {r: v for r, v in requests.items() if r != "pods"}


def _not_offered(
    placement: Placement,
    nodes: Evaluation,
    fitting: Counter[str],
) -> list[str]:
    """The resources the pod asks that no node passing its constraints lists at all (nodes
    of one class list the same resources: each class is looked at once)."""
    missing = [r for r in placement.requests if r != "pods"]
    classes = nodes.excluded_classes
    if classes is None:  # judged node by node
        classes = [(c, h) for (c, _), pool in nodes.excluded.items() for _, h in pool]
    for category, health in classes:
        if category in fitting:
            missing = [r for r in missing if r not in health.allocatable_all]
            if not missing:
                break
    return missing


def exclusion_code(category: str) -> str:
    """The reason code of an exclusion category ("untolerated taint dedicated")."""
    if not category:
        return "scheduling.no-gpu-nodes"
    found = EXCLUSION_CODE.get(category)
    if found is None:  # a category that carries detail: "untolerated taint <key>"
        found = next((c for k, c in EXCLUSION_CODE.items() if category.startswith(k)), None)
    return found or "scheduling.selector-mismatch"


def _unmatched_labels(pod: Obj, nodes: Evaluation) -> list[str]:
    """The pod's nodeSelector pairs that no node in the cluster carries."""
    selector = (pod.get("spec") or {}).get("nodeSelector") or {}
    key = tuple(sorted(selector.items()))
    found = nodes.derived.unmatched.get(key)
    if found is None:
        every = nodes.representatives
        if every is None:
            every = [node for pool in nodes.excluded.values() for node, _ in pool]
        found = nodes.derived.unmatched[key] = [
            f"{k}={v}" for k, v in selector.items() if not any(labels(n).get(k) == v for n in every)
        ]
    return list(found)


def no_candidate_summary(
    code: str, gpu: dict[str, int], *, missing: list[str], absent: Sequence[str] = ()
) -> str:
    """The scheduling headline when no node can ever take the pod. Every input may be empty:
    a pod asking no GPU, a selector on affinity alone, a cluster with no node."""
    want = ", ".join(f"{fmt_amount(k, v)} {k}" for k, v in gpu.items())
    asks = f"pod requests {want}" if want else "the pod requests no accelerator"
    labels_text = ", ".join(missing)
    vendor = next(filter(None, map(vendor_of, gpu)), None)
    kind = (
        "node" if vendor is None
        else "GPU node" if vendor.device_word == "GPU"
        else f"{vendor.name} node"
    )  # fmt: skip
    if code == "scheduling.selector-mismatch":
        if labels_text:
            return f"no {kind} has the label(s) the pod's nodeSelector asks for: {labels_text} ({asks})"
        return f"no {kind} matches the pod's nodeSelector/affinity ({asks})"
    return {
        "scheduling.untolerated-taint": f"every {kind} the pod could use carries a taint the pod does not tolerate ({asks})",
        "scheduling.request-too-large": f"the pod asks more than any node it may use can ever offer ({asks})",
        "scheduling.no-mig-profile": f"no node the pod may use can offer the MIG profile it asks for ({asks})",
        "scheduling.gpus-only-through-dra": f"the nodes the pod may use offer their GPUs only through DRA ResourceClaims ({asks})",
        "scheduling.dra-no-matching-device": "no node the pod may use publishes devices for its ResourceClaims",
        "scheduling.no-gpu-nodes": f"the cluster has no GPU node for this pod ({asks})",
        NO_NODES: "the cluster has no nodes",
        NOT_OFFERED: (
            f"no node the pod may use offers {', '.join(absent) or 'every resource it asks'} "
            f"({asks})"
        ),
    }.get(code, f"no node satisfies the pod's placement constraints ({asks})")


def _constraint(code: str, pod: Obj) -> list[str]:
    """What pods stuck with no candidate share when no label is missing outright: the
    selector they ask for, or the request no node can ever meet (a taint is the code's)."""
    selector = (pod.get("spec") or {}).get("nodeSelector") or {}
    if code == "scheduling.selector-mismatch":
        return [f"nodeSelector {k}={v}" for k, v in sorted(selector.items())]
    if code in ("scheduling.request-too-large", "scheduling.no-mig-profile"):
        return [f"request {v} {k}" for k, v in sorted(gpu_requests(pod).items())]
    return []
