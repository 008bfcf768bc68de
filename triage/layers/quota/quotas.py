"""Namespace policy enforced when a pod is created: ResourceQuotas (which reject the pod, so the
evidence sits on its Job or ReplicaSet as FailedCreate) and PriorityClasses that do not exist."""

from __future__ import annotations

import re

from triage.cluster.objects import Obj, name_of
from triage.cluster.quantities import amount, fmt_amount, pod_requests, resources
from triage.cluster.source import ReadFailedError
from triage.layers.quota.admission import failed_create_signal, scope_matches
from triage.layers.quota.base import QuotaInput
from triage.model import Layer
from triage.signals import Signal
from triage.vendors import is_accelerator


def _limits(pod: Obj) -> dict[str, int]:
    total: dict[str, int] = {}
    for c in (pod.get("spec") or {}).get("containers") or []:
        for r, v in resources((c.get("resources") or {}).get("limits")).items():
            total[r] = total.get(r, 0) + v
    return total


def _quota_need(key: str, pod: Obj) -> int | None:
    """How much of a quota item one more such pod would consume (None: not tracked here)."""
    if key in ("pods", "count/pods"):
        return 1
    if key.startswith("limits."):
        return _limits(pod).get(key.removeprefix("limits."))
    return pod_requests(pod).get(key.removeprefix("requests."))


def check_resource_quotas(inp: QuotaInput) -> None:
    try:
        quotas = inp.read("ResourceQuota", inp.namespace)
    except ReadFailedError as e:
        inp.could_not(e)
        return
    if inp.pod is not None and not inp.sides:
        return  # a pod that exists was admitted: a full quota is only a side finding for it
    subject = inp.template if inp.pod is None else inp.pod
    for rq in quotas:
        selects, scopes = scope_matches(rq, subject) if subject is not None else (True, "")
        if not selects:
            continue  # its scopes count other pods (another PriorityClass, BestEffort, ...)
        scoped = f" (scopes: {scopes})" if scopes else ""
        status = rq.get("status") or {}
        hard, used = (
            status.get("hard") or (rq.get("spec") or {}).get("hard") or {},
            status.get("used") or {},
        )
        for key, hard_raw in hard.items():
            res = key.removeprefix("requests.").removeprefix("limits.")
            try:
                h, u = amount(res, hard_raw), amount(res, used.get(key, 0))
            except ValueError:
                continue
            need = _quota_need(key, subject) if inp.pod is None and subject is not None else None
            if need and u + need > h:
                shown = f"{fmt_amount(res, u)}/{fmt_amount(res, h)}"
                line = f"ResourceQuota {name_of(rq)}{scoped}: {key} used {shown}"
                inp.signals.append(
                    Signal(
                        Layer.QUOTA,
                        "quota.resourcequota-exceeded",
                        f"namespace {inp.namespace} quota {name_of(rq)}{scoped} is exhausted: {key} "
                        f"{shown}, each new pod needs {fmt_amount(res, need)}",
                        evidence=[line + f"; a new pod needs {fmt_amount(res, need)}"],
                        objects=[f"ResourceQuota {inp.namespace}/{name_of(rq)}"],
                    )
                )
            elif u >= h and (is_accelerator(res) or key in ("pods", "count/pods")):
                shown = f"{fmt_amount(res, u)}/{fmt_amount(res, h)}"
                inp.signals.append(
                    Signal(
                        Layer.QUOTA,
                        "quota.resourcequota-full",
                        f"namespace {inp.namespace} is at its quota {name_of(rq)} ({key} {shown}): "
                        "further pods will be rejected",
                        blocking=False,
                    )
                )


_EXCEEDED = re.compile(r"exceeded quota: ([a-z0-9]([-a-z0-9.]*[a-z0-9])?)")


def _quota_named(namespace: str, message: str) -> list[str]:
    """The ResourceQuota an admission rejection names ("exceeded quota: gpu-quota, ...")."""
    found = _EXCEEDED.search(message)
    return [f"ResourceQuota {namespace}/{found.group(1)}"] if found else []


def _scope_words(inp: QuotaInput, named: list[str]) -> str:
    """The scopes of the quota a rejection names, read from the quota itself."""
    if not named:
        return ""
    try:
        quotas = inp.read("ResourceQuota", inp.namespace)
    except ReadFailedError:
        return ""
    want = named[0].rsplit("/", 1)[-1]
    for rq in quotas:
        if name_of(rq) == want:
            scopes = scope_matches(rq, inp.template or {})[1]
            return f" (its scopes: {scopes})" if scopes else ""
    return ""


def check_failed_create(inp: QuotaInput) -> None:
    """`FailedCreate` on the owner: the only trace of pods that admission rejected."""
    seen = False
    for ev in inp.workload_events:
        if ev.reason != "FailedCreate" or seen:
            continue
        policy = failed_create_signal(inp, ev.kind, ev.name, ev.message, str(ev))
        if policy is not None:
            seen = True
            inp.signals.append(policy)
        elif "exceeded quota" in ev.message:
            seen = True
            named = _quota_named(inp.namespace, ev.message)
            inp.signals.append(
                Signal(
                    Layer.QUOTA,
                    "quota.resourcequota-exceeded",
                    f"pods of {ev.kind}/{ev.name} are rejected at creation: namespace quota "
                    f"{named[0].rsplit('/', 1)[-1] + ' ' if named else ''}exceeded"
                    + _scope_words(inp, named),
                    evidence=[str(ev)],
                    objects=named,
                )
            )
        elif "PriorityClass" in ev.message or "priority class" in ev.message.lower():
            seen = True
            inp.signals.append(
                Signal(
                    Layer.QUOTA,
                    "quota.priorityclass-missing",
                    f"pods of {ev.kind}/{ev.name} are rejected: their PriorityClass does not exist",
                    evidence=[str(ev)],
                )
            )
        elif "RuntimeClass" in ev.message:
            seen = True
            inp.signals.append(
                Signal(
                    Layer.DRIVER,
                    "driver.runtimeclass-missing",
                    f"pods of {ev.kind}/{ev.name} are rejected: their RuntimeClass does not exist",
                    evidence=[str(ev)],
                )
            )


def check_priority(inp: QuotaInput) -> None:
    pod = inp.pod or inp.template
    if pod is None:
        return
    spec = pod.get("spec") or {}
    pc_name = spec.get("priorityClassName")
    if not pc_name:
        return
    try:
        classes = inp.read("PriorityClass", None)
    except ReadFailedError as e:
        inp.could_not(e)
        return
    if classes and not any(name_of(c) == pc_name for c in classes):
        inp.signals.append(
            Signal(
                Layer.QUOTA,
                "quota.priorityclass-missing",
                f"PriorityClass {pc_name} does not exist: pods using it are rejected",
                objects=[f"PriorityClass {pc_name}"],
            )
        )
