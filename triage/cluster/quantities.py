"""Resource quantities and what a pod requests, by the scheduler's rules.

Quantities parse as the API server does (`500m`, `16Gi`, `1e3`); a pod's effective request
is the larger of its init containers' maximum and its containers' sum, plus pod overhead,
with sidecar init containers (restartPolicy Always) counted among the running ones.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from functools import lru_cache
from typing import Any

from triage.cluster.memo import IdentityMemo
from triage.cluster.objects import Obj, PerSpec
from triage.vendors import NVIDIA, accelerator_requests, is_accelerator

GPU = NVIDIA.device_resource  # the default accelerator: a step's {resource} when none is asked
MIG_PREFIX = NVIDIA.partition_prefix or ""

_SUFFIX: dict[str, int | Decimal] = {
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60,
    "n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": 1,
    "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18,
}  # fmt: skip
_QUANTITY = re.compile(
    r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)?$"
)


_MAX_DIGITS = 30  # 10**30 of anything is past every resource Kubernetes counts in an int64


def quantity(value: Any) -> Decimal:
    """Parse a Kubernetes quantity ("500m", "16Gi", "1e3", 2). Raises ValueError if malformed
    or beyond what Kubernetes counts (an int64 of the base unit)."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ValueError(f"not a Kubernetes quantity: {value!r}")
    text = str(value).strip()
    m = _QUANTITY.match(text) if len(text) <= 64 else None
    if not m:
        raise ValueError(f"not a Kubernetes quantity: {text[:64]!r}")
    try:
        number = Decimal(m.group(1))
    except InvalidOperation as e:
        raise ValueError(f"not a Kubernetes quantity: {text!r}") from e
    if not number.is_finite() or (number and number.adjusted() > _MAX_DIGITS):
        raise ValueError(f"quantity out of range: {text!r}")
    q = number * Decimal(_SUFFIX[m.group(2) or ""])
    if abs(q) >= 2**63:
        raise ValueError(f"quantity out of range: {text!r}")
    return q


def is_extended(resource: str) -> bool:
    """Whether Kubernetes counts `resource` as an extended resource (a device plugin's, any
    name with a domain outside kubernetes.io): whole units, request equal to limit."""
    return (
        "/" in resource
        and "kubernetes.io/" not in resource
        and not resource.startswith("requests.")
    )


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
    if resource in ("memory", "ephemeral-storage") or resource.startswith("hugepages-"):
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


# A triage asks for one pod's requests several times (the fleet view, the scheduling and
# quota layers, the verdict), and a sweep for those of many pods sharing one spec.
_REQUESTS, _SOURCES = PerSpec(), PerSpec()
_ACCELERATORS = PerSpec()  # by the requests they are found among (`pod_requests`' are shared)
# Requests by what they are worked out from: a workload's pods on different nodes have specs
# of their own but the same containers (`kube.share`): 17 lists for 22,593 specs at 5,000
# nodes.
_BY_PARTS = IdentityMemo(maxsize=20_000)


def pod_requests(pod: Obj) -> dict[str, int]:
    """Effective requests as the scheduler computes them (shared: callers must not change it).

    max(sum of app containers + restartable init (sidecar) containers, largest regular init
    container plus sidecars started before it) + pod overhead.
    """
    return _REQUESTS.of(pod.get("spec") or {}, _requests_by_parts)


def _requests_by_parts(spec: Obj) -> dict[str, int]:
    parts = (spec.get("containers"), spec.get("initContainers"), spec.get("overhead"))
    return _BY_PARTS.get(tuple(map(id, parts)), parts, lambda: _effective_requests(spec))


def _effective_requests(spec: Obj) -> dict[str, int]:
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


def request_sources(pod: Obj) -> dict[str, str]:
    """Per requested resource, what drives the pod's effective request, as a person says it:
    "container trainer", "init container fetch", "containers a, b and sidecar c", with
    "+ pod overhead" when overhead adds to it. (Shared: callers must not change it.)"""
    return _SOURCES.of(pod.get("spec") or {}, _request_sources)


def _request_sources(spec: Obj) -> dict[str, str]:
    running: dict[str, list[str]] = {}
    for c in spec.get("containers") or []:
        for r, v in _container_requests(c).items():
            if v > 0:
                running.setdefault(r, []).append(f"container {c.get('name')}")
    sidecars: dict[str, list[tuple[str, int]]] = {}
    peak: dict[str, tuple[int, str]] = {}
    for c in spec.get("initContainers") or []:
        req = _container_requests(c)
        if c.get("restartPolicy") == "Always":
            for r, v in req.items():
                if v > 0:
                    sidecars.setdefault(r, []).append((f"sidecar {c.get('name')}", v))
                    running.setdefault(r, []).append(f"sidecar {c.get('name')}")
            continue
        for r, v in req.items():
            with_sidecars = v + sum(x for _, x in sidecars.get(r, []))
            if v > 0 and with_sidecars > peak.get(r, (0, ""))[0]:
                peak[r] = (with_sidecars, f"init container {c.get('name')}")
    totals = _effective_requests(spec)
    out: dict[str, str] = {}
    for r in totals:
        run_sum = sum(_container_requests(c).get(r, 0) for c in spec.get("containers") or [])
        run_sum += sum(v for _, v in sidecars.get(r, []))
        if r in peak and peak[r][0] > run_sum:
            who = peak[r][1]
        else:
            names = running.get(r, [])
            who = (
                names[0]
                if len(names) == 1
                else ", ".join(names[:-1]) + f" and {names[-1]}"
                if names
                else ""
            )
        if r in resources(spec.get("overhead")):
            who = f"{who} + pod overhead" if who else "pod overhead"
        out[r] = who
    return out


def asks(pod: Obj, wanted: Mapping[str, int]) -> str:
    """The pod's request of `wanted` resources and what drives each: "the pod asks 8
    nvidia.com/gpu (init container fetch)"."""
    sources = request_sources(pod)
    drivers = {sources.get(r, "") for r in wanted}
    if len(drivers) == 1:  # one container (or the same set) asks all of it: say so once
        who = drivers.pop()
        said = ", ".join(f"{fmt_amount(r, v)} {r}" for r, v in wanted.items())
        return f"the pod asks {said}" + (f" ({who})" if who else "")
    parts = [
        f"{fmt_amount(r, v)} {r}" + (f" ({sources[r]})" if sources.get(r) else "")
        for r, v in wanted.items()
    ]
    return "the pod asks " + ", ".join(parts)


def gpu_requests(pod: Obj) -> dict[str, int]:
    """The accelerator resources (whole devices, slices, shared devices) a pod requests
    (shared, as `pod_requests`' are: callers must not change it)."""
    return _ACCELERATORS.of(pod_requests(pod), accelerator_requests)


def wants_gpu(pod: Obj, requests: Mapping[str, int]) -> bool:
    """Accelerators as extended resources, or devices claimed through DRA."""
    return any(map(is_accelerator, requests)) or bool((pod.get("spec") or {}).get("resourceClaims"))
