"""What the pods bound to each node request: the scheduler's view of a node's "used"."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from triage.cluster.objects import Obj, name_of, ns_of, pod_terminated
from triage.cluster.quantities import pod_requests


@dataclass(slots=True)
class NodeUsage:
    """What non-terminated pods bound to a node request: the scheduler's view of 'used'.

    `requests` maps resource names to integer amounts (cpu in millicores, memory in bytes,
    extended resources as counts). `pods` names the pods as "namespace/name".
    """

    requests: dict[str, int] = field(default_factory=dict)
    pods: list[str] = field(default_factory=list)


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
