"""Volcano: the pod's PodGroup (minMember, phase, conditions) and its Queue (state, capacity)."""

from __future__ import annotations

from triage.cluster.objects import VOLCANO_GROUP, annotations_of, name_of
from triage.cluster.source import ReadFailedError
from triage.layers.quota.base import QuotaInput
from triage.model import Layer
from triage.signals import Signal
from triage.vendors import is_accelerator


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
    except ReadFailedError as e:
        inp.could_not(e)
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
        gpu_cap = {k: v for k, v in cap.items() if is_accelerator(k)}
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
                    objects=[f"Queue {qname}"],
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
                objects=[f"Queue {qname}"],
            )
        )
