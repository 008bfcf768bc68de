"""Per-node requests of non-terminated pods, maintained incrementally from pod changes.

Every triage needs "what is already allocated on each node"; recomputing it means walking all
pods (150,000 at the Kubernetes scalability limit). The index keeps each pod's contribution
and adjusts only the affected node on a change. Published `NodeUsage` values are replaced,
never mutated, so `snapshot()` is a cheap shallow copy a reader may keep.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from triage.cluster.objects import Obj, pod_terminated
from triage.cluster.quantities import pod_requests
from triage.cluster.source import key
from triage.cluster.usage import NodeUsage

Contribution = tuple[str, dict[str, int]]


def contribution(pod: Obj) -> Contribution | None:
    node = (pod.get("spec") or {}).get("nodeName")
    if not node or pod_terminated(pod):
        return None
    return str(node), pod_requests(pod)


class UsageIndex:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_pod: dict[tuple[str, str], Contribution] = {}
        self._usage: dict[str, NodeUsage] = {}

    def replace(self, pods: Iterable[Obj]) -> None:
        """Rebuild from a full list (initial sync or relist)."""
        by_pod: dict[tuple[str, str], Contribution] = {}
        usage: dict[str, NodeUsage] = {}
        for pod in pods:
            c = contribution(pod)
            if c is None:
                continue
            k = key(pod)
            by_pod[k] = c
            u = usage.setdefault(c[0], NodeUsage())
            for res, amount in c[1].items():
                u.requests[res] = u.requests.get(res, 0) + amount
            u.pods.append(f"{k[0]}/{k[1]}")
        with self._lock:
            self._by_pod, self._usage = by_pod, usage

    def change(self, old: Obj | None, new: Obj | None) -> None:
        k = key(new if new is not None else old or {})
        c_new = contribution(new) if new is not None else None
        with self._lock:
            c_old = self._by_pod.pop(k, None)
            if c_old == c_new:
                if c_new is not None:
                    self._by_pod[k] = c_new
                return
            ref = f"{k[0]}/{k[1]}"
            if c_old is not None:
                self._adjust(c_old, ref=ref, sign=-1)
            if c_new is not None:
                self._by_pod[k] = c_new
                self._adjust(c_new, ref=ref, sign=1)

    def _adjust(self, c: Contribution, *, ref: str, sign: int) -> None:
        node, reqs = c
        cur = self._usage.get(node) or NodeUsage()
        requests = dict(cur.requests)
        for res, amount in reqs.items():
            requests[res] = requests.get(res, 0) + sign * amount
            if requests[res] == 0:
                del requests[res]
        pods = [p for p in cur.pods if p != ref] if sign < 0 else [*cur.pods, ref]
        if pods:
            self._usage[node] = NodeUsage(requests=requests, pods=pods)
        else:
            self._usage.pop(node, None)

    def snapshot(self) -> dict[str, NodeUsage]:
        with self._lock:
            return dict(self._usage)
