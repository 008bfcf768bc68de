"""Reading Kubernetes objects the way the control plane does.

Quantities, effective pod requests, taints and tolerations, node affinity, conditions and the
two shapes of events. Each function mirrors a documented Kubernetes rule, so the engine's
independent evaluation of a node agrees with the scheduler's.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import Any

from triage.source import NodeUsage, Obj

GPU = "nvidia.com/gpu"
MIG_PREFIX = "nvidia.com/mig-"

_SUFFIX: dict[str, int | Decimal] = {
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
    "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": 1,
    "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
}  # fmt: skip
_QUANTITY = re.compile(
    r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$"
)


def quantity(value: Any) -> Decimal:
    """Parse a Kubernetes quantity ("500m", "16Gi", "1e3", 2). Raises ValueError if malformed."""
    text = str(value).strip()
    m = _QUANTITY.match(text)
    if not m:
        raise ValueError(f"not a Kubernetes quantity: {text!r}")
    try:
        number = Decimal(m.group(1))
    except InvalidOperation as e:
        raise ValueError(f"not a Kubernetes quantity: {text!r}") from e
    return number * Decimal(_SUFFIX[m.group(2) or ""])


def amount(resource: str, value: Any) -> int:
    """A quantity in the integer unit we account in: millicores for cpu, units otherwise."""
    return _amount(resource == "cpu", str(value))


@lru_cache(maxsize=4096)
def _amount(cpu: bool, value: str) -> int:
    # A cluster repeats the same few hundred quantity strings across 150,000 pods: parse once.
    q = quantity(value)
    if cpu:
        q *= 1000
    return int(q.to_integral_value(rounding="ROUND_CEILING"))


def fmt_amount(resource: str, value: int) -> str:
    if resource == "cpu":
        return f"{value / 1000:g}" if value % 1000 == 0 else f"{value}m"
    if resource in ("memory", "ephemeral-storage"):
        for unit, size in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if value >= size and value % size == 0:
                return f"{value // size}{unit}"
        return str(value)
    return str(value)


def resources(mapping: dict[str, Any] | None) -> dict[str, int]:
    out: dict[str, int] = {}
    for res, val in (mapping or {}).items():
        try:
            out[res] = amount(res, val)
        except ValueError:
            continue
    return out


def _container_requests(container: Obj) -> dict[str, int]:
    res = container.get("resources") or {}
    # Extended resources must set limits; requests default to limits when only limits are set.
    merged = resources(res.get("limits"))
    merged.update(resources(res.get("requests")))
    return merged


def pod_requests(pod: Obj) -> dict[str, int]:
    """Effective requests as the scheduler computes them.

    max(sum of app containers + restartable init (sidecar) containers, largest regular init
    container plus sidecars started before it) + pod overhead.
    """
    spec = pod.get("spec") or {}
    total: dict[str, int] = {}
    for c in spec.get("containers") or []:
        for r, v in _container_requests(c).items():
            total[r] = total.get(r, 0) + v
    sidecars: dict[str, int] = {}
    init_peak: dict[str, int] = {}
    for c in spec.get("initContainers") or []:
        req = _container_requests(c)
        if c.get("restartPolicy") == "Always":
            for r, v in req.items():
                sidecars[r] = sidecars.get(r, 0) + v
                total[r] = total.get(r, 0) + v
            continue
        for r, v in req.items():
            init_peak[r] = max(init_peak.get(r, 0), v + sidecars.get(r, 0))
    for r, v in init_peak.items():
        total[r] = max(total.get(r, 0), v)
    for r, v in resources(spec.get("overhead")).items():
        total[r] = total.get(r, 0) + v
    return {r: v for r, v in total.items() if v > 0}


def gpu_requests(pod: Obj) -> dict[str, int]:
    """The NVIDIA resources (whole GPUs, MIG slices, shared GPUs) a pod requests."""
    return {r: v for r, v in pod_requests(pod).items() if r.startswith("nvidia.com/")}


def pod_terminated(pod: Obj) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed")


def meta(obj: Obj) -> dict[str, Any]:
    m = obj.get("metadata")
    return m if isinstance(m, dict) else {}


def name_of(obj: Obj) -> str:
    return str(meta(obj).get("name", ""))


def ns_of(obj: Obj) -> str:
    return str(meta(obj).get("namespace", ""))


def labels(obj: Obj) -> dict[str, str]:
    return meta(obj).get("labels") or {}


def annotations_of(obj: Obj) -> dict[str, str]:
    return meta(obj).get("annotations") or {}


def condition(obj: Obj, ctype: str) -> Obj | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype:
            return c  # type: ignore[no-any-return]
    return None


def condition_true(obj: Obj, ctype: str) -> bool | None:
    c = condition(obj, ctype)
    if c is None:
        return None
    return c.get("status") == "True"


# --- taints, tolerations, affinity ---------------------------------------------------------


def tolerates(tolerations: Iterable[Obj], taint: Obj) -> bool:
    for t in tolerations:
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        op = t.get("operator") or "Equal"
        if not t.get("key"):
            if op == "Exists":
                return True
            continue
        if t.get("key") != taint.get("key"):
            continue
        if op == "Exists" or (t.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def untolerated_taints(pod: Obj, node: Obj, *, ignore: Iterable[str] = ()) -> list[Obj]:
    """Taints with NoSchedule/NoExecute effect the pod does not tolerate."""
    tolerations = (pod.get("spec") or {}).get("tolerations") or []
    skip = set(ignore)
    return [
        t
        for t in (node.get("spec") or {}).get("taints") or []
        if t.get("effect") in ("NoSchedule", "NoExecute")
        and t.get("key") not in skip
        and not tolerates(tolerations, t)
    ]


def taint_str(t: Obj) -> str:
    value = f"={t['value']}" if t.get("value") else ""
    return f"{t.get('key')}{value}:{t.get('effect')}"


def _match_expression(expr: Obj, values: dict[str, str]) -> bool:
    k, op, want = expr.get("key", ""), expr.get("operator"), expr.get("values") or []
    have = values.get(k)
    if op == "In":
        return have is not None and have in want
    if op == "NotIn":
        return have is None or have not in want
    if op == "Exists":
        return have is not None
    if op == "DoesNotExist":
        return have is None
    if op in ("Gt", "Lt") and have is not None and want:
        try:
            a, b = int(have), int(want[0])
        except ValueError:
            return False
        return a > b if op == "Gt" else a < b
    return False


def label_selector_matches(selector: Obj | None, values: dict[str, str]) -> bool:
    """A metav1.LabelSelector against labels: None matches nothing, {} everything."""
    if selector is None:
        return False
    if any(values.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    return all(_match_expression(e, values) for e in selector.get("matchExpressions") or [])


def selector_str(selector: Obj | None) -> str:
    """A label selector the way kubectl's -l takes it: app=web,tier in (a,b)."""
    if not selector:
        return "everything" if selector is not None else "nothing"
    parts = [f"{k}={v}" for k, v in (selector.get("matchLabels") or {}).items()]
    for e in selector.get("matchExpressions") or []:
        op, key, vals = e.get("operator"), e.get("key", ""), ",".join(e.get("values") or [])
        parts.append(
            {"In": f"{key} in ({vals})", "NotIn": f"{key} notin ({vals})", "Exists": key}.get(
                str(op), f"!{key}"
            )
        )
    return ",".join(parts)


def node_selector_term_matches(term: Obj, node: Obj) -> bool:
    exprs = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not exprs and not fields:
        return False  # an empty term matches nothing
    lab = labels(node)
    if not all(_match_expression(e, lab) for e in exprs):
        return False
    return all(_match_expression(f, {"metadata.name": name_of(node)}) for f in fields)


def required_affinity_terms(pod: Obj) -> list[Obj] | None:
    aff = ((pod.get("spec") or {}).get("affinity") or {}).get("nodeAffinity") or {}
    req = aff.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    terms = req.get("nodeSelectorTerms")
    return terms if terms else None


def selector_mismatch(pod: Obj, node: Obj) -> list[str]:
    """Which nodeSelector keys (or 'node affinity') exclude the node, empty if it matches."""
    spec = pod.get("spec") or {}
    selector = spec.get("nodeSelector")
    if not selector and not spec.get("affinity"):
        return []
    lab = labels(node)
    out = [
        f"{k}={v}" + (f" (node has {lab[k]})" if k in lab else " (node lacks label)")
        for k, v in (selector or {}).items()
        if lab.get(k) != v
    ]
    terms = required_affinity_terms(pod)
    if terms is not None and not any(node_selector_term_matches(t, node) for t in terms):
        out.append("required node affinity")
    return out


# --- events ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Event:
    """An event normalised across the core/v1 and events.k8s.io/v1 shapes."""

    reason: str
    message: str
    type: str
    count: int
    last_seen: datetime | None
    kind: str
    name: str

    def __str__(self) -> str:
        times = f" (x{self.count})" if self.count > 1 else ""
        return f"{self.kind}/{self.name} event {self.reason}{times}: {self.message}"


def parse_time(value: Any) -> datetime | None:
    if not value or not isinstance(value, str):
        return None
    try:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


def normalise_event(ev: Obj) -> Event:
    series = ev.get("series") or {}
    count = int(series.get("count") or ev.get("count") or ev.get("deprecatedCount") or 1)
    last = (
        parse_time(series.get("lastObservedTime"))
        or parse_time(ev.get("lastTimestamp"))
        or parse_time(ev.get("eventTime"))
        or parse_time(ev.get("firstTimestamp"))
        or parse_time(meta(ev).get("creationTimestamp"))
    )
    ref = ev.get("involvedObject") or ev.get("regarding") or {}
    return Event(
        reason=str(ev.get("reason") or ""),
        message=" ".join(str(ev.get("message") or ev.get("note") or "").split()),
        type=str(ev.get("type") or "Normal"),
        count=count,
        last_seen=last,
        kind=str(ref.get("kind") or ""),
        name=str(ref.get("name") or ""),
    )


def sorted_events(raw: Iterable[Obj]) -> list[Event]:
    """Newest first."""
    evs = [normalise_event(e) for e in raw]
    epoch = datetime.min.replace(tzinfo=UTC)
    return sorted(evs, key=lambda e: e.last_seen or epoch, reverse=True)


# --- pods --------------------------------------------------------------------------------


def owner(obj: Obj) -> tuple[str, str] | None:
    for ref in meta(obj).get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("kind")), str(ref.get("name"))
    refs = meta(obj).get("ownerReferences") or []
    return (str(refs[0].get("kind")), str(refs[0].get("name"))) if refs else None


def container_states(pod: Obj) -> list[tuple[str, Obj]]:
    status = pod.get("status") or {}
    out = []
    for key in ("initContainerStatuses", "containerStatuses"):
        for cs in status.get(key) or []:
            out.append((str(cs.get("name")), cs))
    return out


def pod_problem(pod: Obj, *, messages: bool = True) -> str | None:
    """One line describing why a pod is not healthy, or None if it is running and ready.

    `messages=False` leaves out kubelet's free-text messages (which embed pod uids and
    back-off timers) and keeps the reasons and restart counts.
    """
    status = pod.get("status") or {}
    phase = status.get("phase")
    for name, cs in container_states(pod):
        state = cs.get("state") or {}
        waiting = state.get("waiting")
        if waiting and waiting.get("reason") not in (None, "PodInitializing"):
            msg = waiting.get("message") if messages else None
            restarts = cs.get("restartCount") or 0
            counted = f" ({restarts} restarts)" if restarts and not messages else ""
            return f"container {name} {waiting.get('reason')}{counted}" + (
                f": {msg}" if msg else ""
            )
        term = state.get("terminated")
        if term and term.get("exitCode", 0) != 0 and phase != "Succeeded":
            why = term.get("reason") or "Error"
            return f"container {name} terminated {why} (exit {term.get('exitCode')})"
    if phase in ("Failed", "Unknown"):
        return f"phase {phase}" + (f": {status.get('reason')}" if status.get("reason") else "")
    if phase == "Pending":
        return "Pending"
    if phase == "Running" and condition_true(pod, "Ready") is False:
        return "running but not Ready"
    return None


def usage_of(pods: Iterable[Obj]) -> dict[str, NodeUsage]:
    """Requests of non-terminated pods bound to each node: the scheduler's "used"."""
    usage: dict[str, NodeUsage] = {}
    for pod in pods:
        node = (pod.get("spec") or {}).get("nodeName")
        if not node or pod_terminated(pod):
            continue
        u = usage.setdefault(node, NodeUsage())
        for res, value in pod_requests(pod).items():
            u.requests[res] = u.requests.get(res, 0) + value
        u.pods.append(f"{ns_of(pod)}/{name_of(pod)}")
    return usage
