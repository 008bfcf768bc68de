"""Kueue: a pod held by its admission gate or a Job suspended for it, followed through its
Workload, LocalQueue and ClusterQueue (stopped, inactive, out of quota, evicted, deactivated)."""

from __future__ import annotations

from triage.cluster.objects import KUEUE_QUEUE, Obj, annotations_of, condition, labels, name_of
from triage.cluster.source import ReadFailedError
from triage.layers.quota.base import QuotaInput, condition_false, find_owned
from triage.model import Layer
from triage.signals import Signal
from triage.vendors import is_accelerator

KUEUE_GATE = "kueue.x-k8s.io/admission"


def _gpu_usage_text(cq: Obj) -> list[str]:
    """ClusterQueue nominal quota vs usage for accelerator resources, per flavor."""
    nominal: dict[tuple[str, str], str] = {}
    for group in (cq.get("spec") or {}).get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for res in flavor.get("resources") or []:
                if is_accelerator(str(res.get("name", ""))):
                    nominal[(flavor.get("name"), res["name"])] = str(res.get("nominalQuota"))
    out = []
    status = cq.get("status") or {}
    usage = status.get("flavorsReservation") or status.get("flavorsUsage") or []
    for flavor in usage:
        for res in flavor.get("resources") or []:
            key = (flavor.get("name"), res.get("name"))
            if key in nominal:
                borrowed = (
                    f", borrowed {res['borrowed']}"
                    if res.get("borrowed") not in (None, 0, "0")
                    else ""
                )
                out.append(
                    f"ClusterQueue {name_of(cq)} flavor {key[0]}: {key[1]} in use {res.get('total')}"
                    f" of nominal {nominal[key]}{borrowed}"
                )
    return out


def check_kueue(inp: QuotaInput) -> None:
    held = _held_by_kueue(inp)
    if held is None:
        return
    what, queue = held
    try:
        wls = inp.read("Workload", inp.namespace)
        lqs = inp.read("LocalQueue", inp.namespace)
        cqs = inp.read("ClusterQueue", None)
    except ReadFailedError as e:
        inp.could_not(e)
        inp.signals.append(
            Signal(Layer.QUOTA, "quota.kueue-pending", f"{what}, waiting for admission")
        )
        return
    evidence = [f"{what} (queue {queue or 'unset'})"]
    lq = next((q for q in lqs if name_of(q) == queue), None)
    if queue and lq is None:
        inp.signals.append(
            Signal(
                Layer.QUOTA,
                "quota.kueue-localqueue-missing",
                f"{what}: LocalQueue {queue} does not exist in namespace {inp.namespace}",
                evidence=evidence,
                objects=[f"LocalQueue {inp.namespace}/{queue}"],
            )
        )
        return
    cq_name = (lq.get("spec") or {}).get("clusterQueue") if lq else None
    cq = next((c for c in cqs if name_of(c) == cq_name), None)
    if lq is not None:
        evidence.append(f"LocalQueue {inp.namespace}/{queue} → ClusterQueue {cq_name}")
    if cq is not None:
        evidence.extend(_gpu_usage_text(cq))
        stop = (cq.get("spec") or {}).get("stopPolicy")
        if stop in ("Hold", "HoldAndDrain") or condition_false(cq, "Active"):
            inp.signals.append(
                Signal(
                    Layer.QUOTA,
                    "quota.kueue-clusterqueue-inactive",
                    f"{what}: ClusterQueue {cq_name} is not active"
                    + (f" (stopPolicy {stop})" if stop else ""),
                    evidence=evidence,
                    objects=[f"ClusterQueue {cq_name}"],
                )
            )
            return
    elif cq_name:
        evidence.append(f"ClusterQueue {cq_name} not found")
    owners = [(str(w.get("kind")), name_of(w)) for w in inp.workloads]
    if inp.pod is not None:
        owners.append(("Pod", name_of(inp.pod)))
    verdict = _workload_verdict(find_owned(wls, owners), what, cq_name, evidence)
    if verdict is not None:
        queue_ref = f"ClusterQueue {cq_name}" if cq_name else f"LocalQueue {inp.namespace}/{queue}"
        inp.signals.append(Signal(Layer.QUOTA, *verdict, evidence=evidence, objects=[queue_ref]))


def _held_by_kueue(inp: QuotaInput) -> tuple[str, str | None] | None:
    """(what holds the workload, its queue name) when Kueue holds it, else None; a Job that is
    suspended with no queue managing it is reported here as such."""
    pod = inp.pod
    job = next((w for w in inp.workloads if w.get("kind") == "Job"), None)
    gated = pod is not None and any(
        g.get("name") == KUEUE_GATE for g in (pod.get("spec") or {}).get("schedulingGates") or []
    )
    queue = None
    for obj in [o for o in (pod, *inp.workloads) if o is not None]:
        queue = labels(obj).get(KUEUE_QUEUE) or annotations_of(obj).get(KUEUE_QUEUE) or queue
    suspended = job is not None and (job.get("spec") or {}).get("suspend") is True
    if gated:
        return f"pod {name_of(pod or {})} is gated by Kueue", queue
    if queue and (suspended or pod is None):
        return f"Job {name_of(job or {})} is suspended by Kueue", queue
    if suspended:
        inp.signals.append(
            Signal(
                Layer.QUOTA,
                "quota.job-suspended",
                f"Job {name_of(job or {})} is suspended (spec.suspend: true) and no queue manages it",
            )
        )
    return None


def _workload_verdict(
    wl: Obj | None, what: str, cq_name: str | None, evidence: list[str]
) -> tuple[str, str] | None:
    """(code, summary) from the Kueue Workload's state, adding its evidence; None when Kueue
    reserved quota and did not refuse admission (it no longer holds the workload)."""
    code, summary = (
        "quota.kueue-pending",
        f"{what}: waiting for quota in ClusterQueue {cq_name or '?'}",
    )
    if wl is None:
        evidence.append("no Kueue Workload found for it yet")
        return code, summary
    reserved = condition(wl, "QuotaReserved")
    evicted = condition(wl, "Evicted")
    if (wl.get("spec") or {}).get("active") is False:
        code, summary = "quota.kueue-inactive", f"{what}: Workload {name_of(wl)} is deactivated"
    elif evicted and evicted.get("status") == "True":
        code = "quota.kueue-evicted"
        summary = f"{what}: Workload {name_of(wl)} was evicted ({evicted.get('reason')})"
    if reserved is not None:
        evidence.append(
            f"Workload {name_of(wl)}: QuotaReserved={reserved.get('status')}"
            f" ({reserved.get('reason', '')}): {reserved.get('message', '')}".rstrip(": ")
        )
        if reserved.get("status") == "True" and not condition_false(wl, "Admitted"):
            return None
    return code, summary
