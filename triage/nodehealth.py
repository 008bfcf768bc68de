"""Per-node health for the two lowest layers: can the node see its GPUs (driver) and does
kubelet advertise them (device plugin)?

Used by the triage of a pod (for the nodes it could use) and by node verification.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from triage.kubeobj import GPU, MIG_PREFIX, condition, labels, name_of, parse_time, resources
from triage.operator import (
    OperatorView,
    component_state,
    failing_validation,
    gpu_resources,
    is_gpu_node,
    node_ready,
)
from triage.source import Obj


@dataclass(slots=True)
class Verdict:
    ok: bool
    code: str = ""
    text: str = ""
    detail: list[str] = field(default_factory=list)


@dataclass(slots=True)
class NodeHealth:
    name: str
    gpu_node: bool
    driver: Verdict
    plugin: Verdict
    capacity: dict[str, int]
    allocatable: dict[str, int]
    allocatable_all: dict[str, int] = field(default_factory=dict)  # cpu, memory, pods, GPUs
    notes: list[str] = field(default_factory=list)
    joining: str | None = None  # GPUs not registered yet, within the grace period after Ready
    # The verdict depends on the time (a GPU node advertising no GPUs: joining, or late):
    # only such nodes are reassessed when the minute changes.
    clock: bool = False
    contradiction: list[str] = field(default_factory=list)  # validator vs component pods
    # Everything besides labels that decides whether a pod could ever use the node, and
    # whether its problems are side findings: nodes with equal signatures (a node pool) are
    # judged once per triage.
    signature: tuple[object, ...] = ()
    # Healthy, schedulable and every NVIDIA device allocatable: only free resources can
    # stop a pod here (the fast path of placement).
    clean: bool = False

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


def _mig_verdict(node: Obj, view: OperatorView) -> Verdict | None:
    lab = labels(node)
    state = lab.get("nvidia.com/mig.config.state")
    config = lab.get("nvidia.com/mig.config", "?")
    if state not in ("pending", "rebooting", "failed"):
        return None
    manager = component_state(view, name_of(node), "mig-manager")
    detail = manager.detail if manager is not None else []
    mgr = f"; {manager.text}" if manager is not None else ""
    if state == "failed":
        return Verdict(
            False,
            "device-plugin.mig-config-failed",
            f"node {name_of(node)}: MIG reconfiguration to {config} failed{mgr}",
            detail,
        )
    return Verdict(
        False,
        "device-plugin.mig-reconfiguring",
        f"node {name_of(node)}: MIG reconfiguration to {config} in progress (state {state}); "
        f"its GPUs return when the mig-manager finishes{mgr}",
        detail,
    )


def _plugin_verdict(node: Obj, view: OperatorView, allocatable: dict[str, int]) -> Verdict:
    name = name_of(node)
    mig = _mig_verdict(node, view)
    if mig is not None:
        return mig
    plugin = component_state(view, name, "device-plugin")
    if plugin is None and not view.plugin_deployed(node):
        # GPUs reach pods some other way here (DRA, or a plugin the operator does not run).
        return Verdict(True, text="device plugin not deployed on this node (DRA or disabled)")
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


def sharing_note(node: Obj) -> str | None:
    """Time-slicing / MPS: allocatable counts replicas, not physical GPUs. That is expected."""
    lab = labels(node)
    replicas = lab.get("nvidia.com/gpu.replicas")
    strategy = lab.get("nvidia.com/gpu.sharing-strategy")
    if not replicas or (replicas in ("0", "1") and not strategy):
        return None
    count = lab.get("nvidia.com/gpu.count", "?")
    return (
        f"node {name_of(node)} shares its {count} GPU(s) by {strategy or 'time-slicing'} "
        f"with {replicas} replicas each: allocatable counts shares, not physical GPUs"
    )


def _minutes_since_ready(node: Obj, now: datetime | None) -> float | None:
    ready = condition(node, "Ready")
    since = parse_time((ready or {}).get("lastTransitionTime"))
    if now is None or since is None or (ready or {}).get("status") != "True":
        return None
    return (now - since).total_seconds() / 60


def _joining(
    node: Obj, health: NodeHealth, *, now: datetime | None, grace_minutes: int
) -> str | None:
    """A node that became Ready minutes ago and is still rolling out its GPU stack."""
    if not health.gpu_node or any(v > 0 for v in health.allocatable.values()):
        return None
    minutes = _minutes_since_ready(node, now)
    if minutes is None:
        return None
    crashing = any(
        "CrashLoopBackOff" in v.text or "Error" in v.text for v in (health.driver, health.plugin)
    )
    if minutes < 0 or minutes > grace_minutes or crashing:
        return None
    return (
        f"node {health.name}: GPUs not registered yet, {minutes:.0f} minute(s) after it became Ready "
        f"(driver and device plugin usually finish within {grace_minutes} minutes)"
    )


def _contradiction(view: OperatorView, health: NodeHealth) -> list[str]:
    """The operator validator and the component pods disagree about the node."""
    validators = view.pods(health.name, "validator")
    if not validators:
        return []
    stuck = failing_validation(view, health.name)
    validator_ok = stuck is None and all(
        (c.get("status") == "True")
        for p in validators
        for c in (p.get("status") or {}).get("conditions") or []
        if c.get("type") == "Ready"
    )
    if health.plugin.code.startswith("device-plugin.mig-"):
        return []  # the mig-manager pauses the plugin on purpose while it repartitions
    components_ok = health.driver.ok and health.plugin.ok
    pod = f"{view.namespace}/{name_of(validators[0])}"
    if validator_ok and not components_ok:
        failing = health.driver if not health.driver.ok else health.plugin
        return [
            f"node {health.name}: the operator validator reports ready, but {failing.text} "
            f"(validator pod {pod})",
        ]
    if not validator_ok and components_ok and stuck:
        return [
            f"node {health.name}: driver and device plugin pods are healthy and GPUs are advertised, "
            f"but the operator validator is stuck at {stuck} (validator pod {pod})",
        ]
    return []


def assess_node(
    node: Obj, view: OperatorView, *, now: datetime | None = None, grace_minutes: int = 15
) -> NodeHealth:
    allocatable = gpu_resources(node, key="allocatable")
    capacity = gpu_resources(node, key="capacity")
    health = NodeHealth(
        name=name_of(node),
        gpu_node=is_gpu_node(node),
        driver=_driver_verdict(node, view, allocatable),
        plugin=_plugin_verdict(node, view, allocatable),
        capacity=capacity,
        allocatable=allocatable,
        allocatable_all=resources((node.get("status") or {}).get("allocatable")),
    )
    for res, cap in capacity.items():
        alloc = allocatable.get(res, 0)
        if alloc < cap:
            health.notes.append(
                f"node {health.name}: {res} allocatable {alloc} < capacity {cap} "
                f"({cap - alloc} device(s) unhealthy)"
            )
    note = sharing_note(node)
    if note:
        health.notes.append(note)
    taints = tuple(
        (t.get("key"), t.get("value"), t.get("effect"))
        for t in (node.get("spec") or {}).get("taints") or []
    )
    health.signature = (
        health.gpu_node,
        health.driver.ok,
        health.plugin.ok,
        taints,
        tuple(sorted(health.allocatable_all.items())),
        tuple(sorted(capacity.items())),
        labels(node).get("nvidia.com/gpu.count"),
    )
    health.clock = health.gpu_node and not any(v > 0 for v in allocatable.values())
    health.joining = _joining(node, health, now=now, grace_minutes=grace_minutes)
    if health.joining is None and health.gpu_node and not any(v > 0 for v in allocatable.values()):
        late = _minutes_since_ready(node, now)
        if late is not None and grace_minutes < late < 24 * 60:
            note = (
                f" (GPUs still not registered {late:.0f} minutes after the node became Ready; "
                f"expected within {grace_minutes})"
            )
            failing = health.driver if not health.driver.ok else health.plugin
            if not failing.ok:
                failing.text += note
    health.contradiction = _contradiction(view, health)
    health.clean = (
        health.gpu_node
        and health.driver.ok
        and health.plugin.ok
        and health.joining is None
        and health.capacity == health.allocatable
        and not (node.get("spec") or {}).get("unschedulable")
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
