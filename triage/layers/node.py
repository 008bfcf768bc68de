"""Per-node health for the two lowest layers: can the node see its GPUs (driver) and does
kubelet advertise them (device plugin)?

Used by the triage of a pod (for the nodes it could use) and by node verification.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from triage.cluster.events import parse_time
from triage.cluster.objects import Obj, condition, labels, name_of, ns_of
from triage.cluster.quantities import GPU, MIG_PREFIX, resources
from triage.layers.driver_health import driver_verdict, gfd_down, mig_verdict
from triage.layers.node_verdict import NodeVerdict
from triage.layers.plugin_health import plugin_verdict, sharing_note
from triage.layers.stacks.state import failing_validation, gpu_resources
from triage.layers.stacks.view import StackView
from triage.vendors import NVIDIA
from triage.vendors.nvidia import COUNT


@dataclass(slots=True)
class NodeHealth:
    name: str
    gpu_node: bool
    driver: NodeVerdict
    plugin: NodeVerdict
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
    stack: str = ""  # the GPU stack serving the node, one line (NodePlan.describe)
    dra_only: bool = False  # GPUs reach pods here only through DRA ResourceClaims
    # Why GPU feature discovery's labels may be missing here (disabled, failing), if it is down.
    gfd_down: str | None = None
    mig_failed: NodeVerdict | None = None  # the MIG manager could not apply nvidia.com/mig.config
    vendors: tuple[str, ...] = ()  # the keys of the vendors whose accelerators it carries

    @property
    def mig_resources(self) -> dict[str, int]:
        return {k: v for k, v in self.allocatable.items() if k.startswith(MIG_PREFIX) and v > 0}


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
    # A component that is switched off, or that no DaemonSet will ever bring, does not come up
    # by waiting.
    lasting = any(v.code.endswith(LASTING) for v in (health.driver, health.plugin))
    if minutes < 0 or minutes > grace_minutes or crashing or lasting:
        return None
    return (
        f"GPU stack still coming up on node {health.name} (since {minutes:.0f} min): no GPUs "
        f"registered yet; the driver and device plugin usually finish within {grace_minutes} minutes"
    )


LASTING = ("-disabled", ".not-deployed", ".not-installed", ".host-plugin")
# Verdicts the validator's "ready" does not contradict: it validated before they began.
_SAID_ALREADY = ("driver.upgrade-in-progress", "driver.upgrade-failed",
                 "device-plugin.not-registered")  # fmt: skip


def _contradiction(view: StackView, health: NodeHealth) -> list[str]:
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
    if any(v.code.endswith((*LASTING, ".paused")) for v in (health.driver, health.plugin)):
        return []  # switched off or run elsewhere on purpose: the finding already says so
    if any(v.code in _SAID_ALREADY for v in (health.driver, health.plugin)):
        return []  # an upgrade or a lost registration the validator ran before: no news
    components_ok = health.driver.ok and health.plugin.ok
    pod = f"{ns_of(validators[0])}/{name_of(validators[0])}"
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
    node: Obj, view: StackView, *, now: datetime | None = None, grace_minutes: int = 15
) -> NodeHealth:
    allocatable = gpu_resources(node, key="allocatable")
    capacity = gpu_resources(node, key="capacity")
    plan = view.plan(node)
    health = NodeHealth(
        name=name_of(node),
        gpu_node=bool(plan.vendors),
        driver=driver_verdict(node, view, plan, allocatable),
        plugin=plugin_verdict(node, view, plan, allocatable),
        capacity=capacity,
        allocatable=allocatable,
        allocatable_all=resources((node.get("status") or {}).get("allocatable")),
        stack=plan.describe(),
        dra_only=plan.dra_only,
        gfd_down=gfd_down(view, plan, name_of(node)),
    )
    health.vendors = tuple(v.key for v in plan.vendors)
    vendor = plan.vendor
    for verdict in (health.driver, health.plugin):
        if vendor is not None and not verdict.ok:  # what reports and steps name it by
            devices = "GPUs" if vendor is NVIDIA else vendor.devices
            verdict.values = {"vendor": vendor.name, "devices": devices, **verdict.values}
    mig = mig_verdict(node, view)
    if mig is not None and mig.code.startswith("driver."):
        health.mig_failed = mig
    health.notes = _device_notes(node, health)
    health.signature = _signature(node, health)
    health.clock = health.gpu_node and not any(v > 0 for v in allocatable.values())
    health.joining = _joining(node, health, now=now, grace_minutes=grace_minutes)
    if health.joining is None and health.clock:
        _say_late(node, health, now=now, grace_minutes=grace_minutes)
    health.contradiction = _contradiction(view, health)
    health.clean = (
        health.gpu_node
        and health.driver.ok
        and health.plugin.ok
        and health.joining is None
        and health.mig_failed is None
        and health.capacity == health.allocatable
        and not (node.get("spec") or {}).get("unschedulable")
    )
    return health


def _device_notes(node: Obj, health: NodeHealth) -> list[str]:
    """Devices kubelet counts but cannot hand out, and GPU sharing that inflates the counts."""
    notes = [
        f"node {health.name}: {res} allocatable {health.allocatable.get(res, 0)} < capacity "
        f"{cap} ({cap - health.allocatable.get(res, 0)} device(s) unhealthy)"
        for res, cap in health.capacity.items()
        if health.allocatable.get(res, 0) < cap
    ]
    note = sharing_note(node)
    return [*notes, note] if note else notes


def _signature(node: Obj, health: NodeHealth) -> tuple[object, ...]:
    """What besides labels decides whether a pod could use the node (see NodeHealth)."""
    taints = tuple(
        (t.get("key"), t.get("value"), t.get("effect"))
        for t in (node.get("spec") or {}).get("taints") or []
    )
    return (
        health.gpu_node,
        health.vendors,
        health.driver.ok,
        health.plugin.ok,
        health.dra_only,
        health.mig_failed is not None,
        health.gfd_down is not None,
        taints,
        tuple(sorted(health.allocatable_all.items())),
        tuple(sorted(health.capacity.items())),
        labels(node).get(COUNT),
    )


def _say_late(node: Obj, health: NodeHealth, *, now: datetime | None, grace_minutes: int) -> None:
    """A GPU node past its grace period still without GPUs: the failing verdict says how late."""
    late = _minutes_since_ready(node, now)
    if late is None or not grace_minutes < late < 24 * 60:
        return
    failing = health.driver if not health.driver.ok else health.plugin
    if not failing.ok:
        failing.text += (
            f" (GPUs still not registered {late:.0f} minutes after the node became Ready; "
            f"expected within {grace_minutes})"
        )


def expected_gpu_count(node: Obj, health: NodeHealth, resource: str) -> int | None:
    """How many of `resource` the node would offer when healthy (None if unknown)."""
    if health.capacity.get(resource):
        return health.capacity[resource]
    if resource == GPU:
        count = labels(node).get(COUNT)
        if count and count.isdigit():
            return int(count)
    return None
