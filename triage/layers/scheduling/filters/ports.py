"""NodePorts: a host port the pod binds is already taken on the node (runs before
NodeResourcesFit, as in kube-scheduler)."""

from __future__ import annotations

from triage.cluster.objects import Obj
from triage.layers.scheduling.filters.view import FilterView, Refusal
from triage.layers.scheduling.framework import FilterPlugin, Phase
from triage.signals import Signal


def host_ports(pod: Obj) -> set[tuple[str, str, int]]:
    """(protocol, hostIP, hostPort) of every container port bound on the node."""
    spec = pod.get("spec") or {}
    out = set()
    for ctr in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        for port in ctr.get("ports") or []:
            if port.get("hostPort"):
                out.add(
                    (
                        str(port.get("protocol") or "TCP"),
                        str(port.get("hostIP") or "0.0.0.0"),
                        int(port["hostPort"]),
                    )
                )
    return out


def ports_clash(a: tuple[str, str, int], b: tuple[str, str, int]) -> bool:
    wild = "0.0.0.0"
    return a[0] == b[0] and a[2] == b[2] and (a[1] == b[1] or wild in (a[1], b[1]))


class NodePorts:
    def __init__(self, view: FilterView) -> None:
        self.view = view
        self.ports = host_ports(view.pod)

    def pre_filter(self) -> list[Signal]:
        return []

    def filter(self, node: str, obj: Obj) -> Refusal | None:
        """NodePorts: a host port the pod binds is taken on the node."""
        if not self.ports:
            return None
        for other in self.view.pods_on(node):
            for mine in self.ports:
                theirs = next((p for p in host_ports(other) if ports_clash(mine, p)), None)
                if theirs is not None:
                    who, detail = self.view.who(other)
                    port = f"{mine[0]}/{mine[2]}"
                    return Refusal(
                        "scheduling.node-ports",
                        f"node {node}: host port {port} is taken by {who}",
                        {"port": port},
                        (f"node {node}: host port {port} held by {detail}",) if detail else (),
                    )
        return None


PLUGIN = FilterPlugin(
    name="NodePorts",
    phase=Phase.BEFORE_FIT,
    category="ports",
    reasons={
        "scheduling.node-ports": (
            "{n} of {c} node(s) the pod can use already have host port {port} taken"
        )
    },
    scheduler_says=("didn't have free ports",),
    pod_fields=("spec.containers[].ports", "spec.initContainers[].ports"),
    applies=lambda pod: bool(host_ports(pod)),
    make=NodePorts,
)
