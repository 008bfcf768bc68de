"""The quota layer: is the tenant allowed to use the GPUs now?

Namespace ResourceQuotas (enforced when a pod is created, so the evidence of a rejected pod
sits on its Job/ReplicaSet), Kueue (scheduling gates, suspended Jobs, Workload conditions,
Local/ClusterQueues), Volcano PodGroups and Queues, and PriorityClasses. This is tenant-side
governance: a platform policy, never reported as a deployment failure.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from triage.cluster.events import Event
from triage.cluster.objects import Obj, annotations_of, condition, labels, meta, name_of
from triage.cluster.quantities import amount, fmt_amount, pod_requests, resources
from triage.cluster.source import ForbiddenError
from triage.layers.base import Context, Outcome
from triage.model import Layer
from triage.signals import Signal, Unknown

KUEUE_GATE = "kueue.x-k8s.io/admission"
KUEUE_QUEUE = "kueue.x-k8s.io/queue-name"
VOLCANO_GROUP = ("scheduling.k8s.io/group-name", "scheduling.volcano.sh/group-name")

Reader = Callable[[str, str | None], list[Obj]]


@dataclass
class QuotaInput:
    namespace: str
    pod: Obj | None  # the pod examined (None when the workload created none)
    template: Obj | None  # a pod-shaped object for a workload's pods yet to be created
    workloads: list[Obj]  # the owner chain, outermost first (Deployment, ReplicaSet) or [Job]
    workload_events: list[Event]
    read: Reader  # read(kind, namespace) raising ForbiddenError
    signals: list[Signal] = field(default_factory=list)
    unknowns: list[Unknown] = field(default_factory=list)


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
    except ForbiddenError as e:  # the layer becomes unknown, with what to grant
        inp.unknowns.append(Unknown(Layer.QUOTA, str(e)))
        return
    subject = inp.template if inp.pod is None else inp.pod
    for rq in quotas:
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
            need = _quota_need(key, subject) if subject is not None else None
            shown = f"{fmt_amount(res, u)}/{fmt_amount(res, h)}"
            line = f"ResourceQuota {name_of(rq)}: {key} used {shown}"
            if inp.pod is None and need and u + need > h:
                inp.signals.append(
                    Signal(
                        Layer.QUOTA,
                        "quota.resourcequota-exceeded",
                        f"namespace {inp.namespace} quota {name_of(rq)} is exhausted: {key} "
                        f"{shown}, each new pod needs {fmt_amount(res, need)}",
                        evidence=[line + f"; a new pod needs {fmt_amount(res, need)}"],
                    )
                )
            elif u >= h and ("nvidia.com/" in key or key in ("pods", "count/pods")):
                inp.signals.append(
                    Signal(
                        Layer.QUOTA,
                        "quota.resourcequota-full",
                        f"namespace {inp.namespace} is at its quota {name_of(rq)} ({key} {shown}): "
                        "further pods will be rejected",
                        blocking=False,
                    )
                )


def check_failed_create(inp: QuotaInput) -> None:
    """`FailedCreate` on the owner: the only trace of pods that admission rejected."""
    seen = False
    for ev in inp.workload_events:
        if ev.reason != "FailedCreate" or seen:
            continue
        if "exceeded quota" in ev.message:
            seen = True
            inp.signals.append(
                Signal(
                    Layer.QUOTA,
                    "quota.resourcequota-exceeded",
                    f"pods of {ev.kind}/{ev.name} are rejected at creation: namespace quota exceeded",
                    evidence=[str(ev)],
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


def _find_owned(objs: list[Obj], owners: list[tuple[str, str]]) -> Obj | None:
    for obj in objs:
        for ref in meta(obj).get("ownerReferences") or []:
            if (ref.get("kind"), ref.get("name")) in owners:
                return obj
    return None


def _gpu_usage_text(cq: Obj) -> list[str]:
    """ClusterQueue nominal quota vs usage for NVIDIA resources, per flavor."""
    nominal: dict[tuple[str, str], str] = {}
    for group in (cq.get("spec") or {}).get("resourceGroups") or []:
        for flavor in group.get("flavors") or []:
            for res in flavor.get("resources") or []:
                if str(res.get("name", "")).startswith("nvidia.com/"):
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
    subject_pod = inp.pod
    job = next((w for w in inp.workloads if w.get("kind") == "Job"), None)
    gated = subject_pod is not None and any(
        g.get("name") == KUEUE_GATE
        for g in (subject_pod.get("spec") or {}).get("schedulingGates") or []
    )
    queue = None
    for obj in [o for o in (subject_pod, *inp.workloads) if o is not None]:
        queue = labels(obj).get(KUEUE_QUEUE) or annotations_of(obj).get(KUEUE_QUEUE) or queue
    suspended = job is not None and (job.get("spec") or {}).get("suspend") is True
    if not (gated or (queue and (suspended or subject_pod is None))):
        if suspended:
            inp.signals.append(
                Signal(
                    Layer.QUOTA,
                    "quota.job-suspended",
                    f"Job {name_of(job or {})} is suspended (spec.suspend: true) and no queue manages it",
                )
            )
        return
    what = (
        f"pod {name_of(subject_pod or {})} is gated by Kueue"
        if gated
        else f"Job {name_of(job or {})} is suspended by Kueue"
    )
    try:
        wls = inp.read("Workload", inp.namespace)
        lqs = inp.read("LocalQueue", inp.namespace)
        cqs = inp.read("ClusterQueue", None)
    except ForbiddenError as e:
        inp.unknowns.append(Unknown(Layer.QUOTA, str(e)))
        inp.signals.append(
            Signal(Layer.QUOTA, "quota.kueue-pending", f"{what}, waiting for admission")
        )
        return
    owners = [(str(w.get("kind")), name_of(w)) for w in inp.workloads]
    if subject_pod is not None:
        owners.append(("Pod", name_of(subject_pod)))
    wl = _find_owned(wls, owners)
    evidence = [f"{what} (queue {queue or 'unset'})"]
    lq = next((q for q in lqs if name_of(q) == queue), None)
    if queue and lq is None:
        inp.signals.append(
            Signal(
                Layer.QUOTA,
                "quota.kueue-localqueue-missing",
                f"{what}: LocalQueue {queue} does not exist in namespace {inp.namespace}",
                evidence=evidence,
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
                )
            )
            return
    elif cq_name:
        evidence.append(f"ClusterQueue {cq_name} not found")
    code, summary = (
        "quota.kueue-pending",
        f"{what}: waiting for quota in ClusterQueue {cq_name or '?'}",
    )
    if wl is not None:
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
                return  # quota reserved and not refused admission: Kueue no longer holds it
    else:
        evidence.append("no Kueue Workload found for it yet")
    inp.signals.append(Signal(Layer.QUOTA, code, summary, evidence=evidence))


def condition_false(obj: Obj, ctype: str) -> bool:
    c = condition(obj, ctype)
    return c is not None and c.get("status") == "False"


def check_volcano(inp: QuotaInput) -> None:
    pod = inp.pod or inp.template
    if pod is None:
        return
    ann = annotations_of(pod)
    group = next((ann[k] for k in VOLCANO_GROUP if ann.get(k)), None)
    if not group:
        return
    try:
        pgs = inp.read("PodGroup", inp.namespace)
        queues = inp.read("Queue", None)
    except ForbiddenError as e:
        inp.unknowns.append(Unknown(Layer.QUOTA, str(e)))
        return
    pg = next((p for p in pgs if name_of(p) == group), None)
    if pg is None:
        inp.signals.append(
            Signal(
                Layer.QUOTA,
                "quota.volcano-podgroup-missing",
                f"Volcano PodGroup {group} does not exist",
            )
        )
        return
    phase = (pg.get("status") or {}).get("phase", "Pending")
    qname = (pg.get("spec") or {}).get("queue") or "default"
    evidence = [
        f"PodGroup {group}: phase {phase}, minMember {(pg.get('spec') or {}).get('minMember', '?')}"
    ]
    for c in (pg.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Unschedulable" and c.get("status") == "True":
            evidence.append(f"PodGroup {group} Unschedulable: {c.get('message', '')}")
    queue = next((q for q in queues if name_of(q) == qname), None)
    if queue is not None:
        state = (queue.get("status") or {}).get("state", "Open")
        cap = (queue.get("spec") or {}).get("capability") or {}
        alloc = (queue.get("status") or {}).get("allocated") or {}
        gpu_cap = {k: v for k, v in cap.items() if k.startswith("nvidia.com/")}
        gpu_alloc = ", ".join(f"{k} {alloc.get(k, 0)}/{v}" for k, v in gpu_cap.items())
        evidence.append(
            f"Queue {qname}: state {state}" + (f", allocated {gpu_alloc}" if gpu_alloc else "")
        )
        if state != "Open":
            inp.signals.append(
                Signal(
                    Layer.QUOTA,
                    "quota.volcano-queue-closed",
                    f"Volcano Queue {qname} is {state}",
                    evidence=evidence,
                )
            )
            return
    if phase == "Pending":
        inp.signals.append(
            Signal(
                Layer.QUOTA,
                "quota.volcano-pending",
                f"Volcano PodGroup {group} is Pending in queue {qname}: the gang is not admitted",
                evidence=evidence,
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
    except ForbiddenError as e:
        inp.unknowns.append(Unknown(Layer.QUOTA, str(e)))
        return
    if classes and not any(name_of(c) == pc_name for c in classes):
        inp.signals.append(
            Signal(
                Layer.QUOTA,
                "quota.priorityclass-missing",
                f"PriorityClass {pc_name} does not exist: pods using it are rejected",
            )
        )


def check(ctx: Context) -> Outcome:
    """ResourceQuotas, Kueue, Volcano and priority, for the pod or its workload."""
    t = ctx.target
    inp = QuotaInput(
        namespace=t.namespace,
        pod=t.pod,
        template=t.template,
        workloads=t.workloads,
        workload_events=ctx.workload_events,
        read=lambda kind, ns: ctx.source.objects(kind, namespace=ns),
    )
    run_quota_checks(inp)
    ctx.unknowns.extend(inp.unknowns)
    return Outcome(signals=inp.signals)


def run_quota_checks(inp: QuotaInput) -> None:
    check_resource_quotas(inp)
    if inp.pod is None:
        check_failed_create(inp)
    check_kueue(inp)
    check_volcano(inp)
    check_priority(inp)
