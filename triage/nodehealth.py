"""Per-node health for the two lowest layers: can the node see its GPUs (driver) and does
kubelet advertise them (device plugin)?

Used by the triage of a pod (for the nodes it could use) and by node verification.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from triage.kubeobj import GPU, MIG_PREFIX, labels, name_of
from triage.operator import (
    OperatorView,
    component_state,
    failing_validation,
    gpu_resources,
    is_gpu_node,
    node_ready,
)
from triage.source import Obj


@dataclass
class Verdict:
    ok: bool
    code: str = ""
    text: str = ""
    detail: list[str] = field(default_factory=list)


@dataclass
class NodeHealth:
    name: str
    gpu_node: bool
    driver: Verdict
    plugin: Verdict
    capacity: dict[str, int]
    allocatable: dict[str, int]
    notes: list[str] = field(default_factory=list)

    @property
    def mig_resources(self) -> dict[str, int]:
        return {k: v for k, v in self.allocatable.items() if k.startswith(MIG_PREFIX) and v > 0}


def _driver_verdict(node: Obj, view: OperatorView, allocatable: dict[str, int]) -> Verdict:
    name = name_of(node)
    ready, why = node_ready(node)
    if not ready:
        return Verdict(False, "driver.node-not-ready", f"node {name} is not Ready: {why}")
    if not is_gpu_node(node):
        return Verdict(True, text="not a GPU node")
    managed = view.driver_managed(node)
    driver = component_state(view, name, "driver")
    if managed and driver is None:
        return Verdict(
            False,
            "driver.pod-missing",
            f"node {name}: no NVIDIA driver pod runs there although the GPU Operator manages its driver",
        )
    if driver is not None and not driver.ok:
        return Verdict(
            False, "driver.pod-failing", f"node {name}: NVIDIA {driver.text}", driver.detail
        )
    toolkit = component_state(view, name, "toolkit")
    if toolkit is not None and not toolkit.ok:
        return Verdict(
            False,
            "driver.toolkit-failing",
            f"node {name}: NVIDIA container {toolkit.text} (runtime not configured for GPUs)",
            toolkit.detail,
        )
    stuck = failing_validation(view, name)
    has_gpus = any(v > 0 for v in allocatable.values())
    if stuck in ("driver-validation", "toolkit-validation", "cuda-validation") and not has_gpus:
        return Verdict(
            False,
            "driver.validation-failed",
            f"node {name}: operator validator stuck at {stuck} and no GPUs advertised",
        )
    strategy = "operator-managed" if managed else "pre-installed"
    return Verdict(True, text=f"driver {strategy}, healthy")


def _plugin_verdict(node: Obj, view: OperatorView, allocatable: dict[str, int]) -> Verdict:
    name = name_of(node)
    plugin = component_state(view, name, "device-plugin")
    plugin_text = f"; {plugin.text}" if plugin is not None else ""
    if view.installed and plugin is None and is_gpu_node(node):
        plugin_text = "; no device-plugin pod runs there"
    if not any(v > 0 for v in allocatable.values()):
        return Verdict(
            False,
            "device-plugin.no-gpu-resource",
            f"node {name} advertises no NVIDIA GPUs in Allocatable{plugin_text}",
            plugin.detail if plugin else [],
        )
    if plugin is not None and not plugin.ok:
        return Verdict(
            False, "device-plugin.pod-failing", f"node {name}: {plugin.text}", plugin.detail
        )
    return Verdict(True, text="GPUs advertised")


def assess_node(node: Obj, view: OperatorView) -> NodeHealth:
    allocatable = gpu_resources(node, key="allocatable")
    capacity = gpu_resources(node, key="capacity")
    health = NodeHealth(
        name=name_of(node),
        gpu_node=is_gpu_node(node),
        driver=_driver_verdict(node, view, allocatable),
        plugin=_plugin_verdict(node, view, allocatable),
        capacity=capacity,
        allocatable=allocatable,
    )
    for res, cap in capacity.items():
        alloc = allocatable.get(res, 0)
        if alloc < cap:
            health.notes.append(
                f"node {health.name}: {res} allocatable {alloc} < capacity {cap} "
                f"({cap - alloc} device(s) unhealthy)"
            )
    return health


def expected_gpu_count(node: Obj, health: NodeHealth, resource: str) -> int | None:
    """How many of `resource` the node would offer when healthy (None if unknown)."""
    if health.capacity.get(resource):
        return health.capacity[resource]
    if resource == GPU:
        count = labels(node).get("nvidia.com/gpu.count")
        if count and count.isdigit():
            return int(count)
    return None
