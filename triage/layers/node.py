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
from triage.layers.stacks.components import GKE, OPERATOR, ROLE_TITLES, Component
from triage.layers.stacks.state import (
    ComponentState,
    component_state,
    failing_validation,
    gpu_resources,
    is_gpu_node,
    node_ready,
)
from triage.layers.stacks.view import Expectation, NodePlan, StackView


@dataclass(slots=True)
class Verdict:
    ok: bool
    code: str = ""
    text: str = ""
    detail: list[str] = field(default_factory=list)
    pod: str = ""  # "namespace/name" of the component pod at fault, if one is
    values: dict[str, str] = field(default_factory=dict)  # playbook placeholders it fills


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
    stack: str = ""  # the GPU stack serving the node, one line (NodePlan.describe)
    dra_only: bool = False  # GPUs reach pods here only through DRA ResourceClaims
    # Why GPU feature discovery's labels may be missing here (disabled, failing), if it is down.
    gfd_down: str | None = None
    mig_failed: Verdict | None = None  # the MIG manager could not apply nvidia.com/mig.config

    @property
    def mig_resources(self) -> dict[str, int]:
        return {k: v for k, v in self.allocatable.items() if k.startswith(MIG_PREFIX) and v > 0}


def _stack_text(exp: Expectation, default: str) -> str:
    stacks = {c.stack for c in exp.serving}
    if GKE in stacks:
        return f"GKE {default}"
    if OPERATOR in stacks or not stacks:
        return f"NVIDIA {default}"
    return default


def _state_verdict(code: str, name: str, state: ComponentState, text: str) -> Verdict:
    return Verdict(False, code, f"node {name}: {text}", state.detail, state.pod)


def _ds_values(comp: Component) -> dict[str, str]:
    return {"daemonset_namespace": comp.namespace, "daemonset_name": comp.name,
            "component_namespace": comp.namespace}  # fmt: skip


def _switch_values(setting: str, component: str) -> dict[str, str]:
    """What the playbook needs to say how to switch a component back on."""
    out = {"setting": setting, "component": component}
    key, _, value = setting.partition("=")
    if key.startswith("nvidia.com/gpu.deploy.") and value == "false":
        out["switch_key"] = key
    return out


def _skipped_by(exp: Expectation) -> str:
    return "; ".join(f"DaemonSet {c.ref} skips it: {why}" for c, why in exp.skipping[:3])


def _driver_verdict(
    node: Obj, view: StackView, plan: NodePlan, allocatable: dict[str, int]
) -> Verdict:
    name = name_of(node)
    ready, why = node_ready(node)
    if not ready:
        return Verdict(False, "driver.node-not-ready", f"node {name} is not Ready: {why}")
    if not is_gpu_node(node):
        return Verdict(True, text="not a GPU node")
    exp = plan.role("driver")
    has_gpus = any(v > 0 for v in allocatable.values())
    driver = component_state(view, name, "driver")
    title = _stack_text(exp, "driver installer" if GKE in plan.stacks else "driver")
    if driver is not None and not driver.ok:
        text = driver.text.replace("driver pod", f"{title} pod", 1)
        return _state_verdict("driver.pod-failing", name, driver, text)
    if driver is None and not has_gpus:
        missing = _driver_missing(name, exp, plan)
        if missing is not None:
            return missing
    toolkit = component_state(view, name, "toolkit")
    if toolkit is not None and not toolkit.ok:
        return _state_verdict(
            "driver.toolkit-failing",
            name,
            toolkit,
            f"NVIDIA container {toolkit.text} (runtime not configured for GPUs)",
        )
    stuck = failing_validation(view, name)
    if stuck in ("driver-validation", "toolkit-validation", "cuda-validation") and not has_gpus:
        return Verdict(
            False,
            "driver.validation-failed",
            f"node {name}: operator validator stuck at {stuck} and no GPUs advertised",
        )
    off = plan.role("toolkit").disabled
    if off and not has_gpus and _waiting_in(view, name, "toolkit-validation"):
        return Verdict(
            False,
            "driver.component-disabled",
            f"node {name}: the NVIDIA container toolkit is switched off there ({off}) and the "
            "GPU components wait for it: nothing configures the container runtime for GPUs",
            values=_switch_values(off, "NVIDIA container toolkit"),
        )
    if exp.host:
        return Verdict(True, text=f"driver {exp.host}, healthy")
    return Verdict(True, text="driver operator-managed, healthy" if driver else "driver healthy")


def _driver_missing(name: str, exp: Expectation, plan: NodePlan) -> Verdict | None:
    """No driver pod on a GPU node that advertises no GPUs: is one missing, switched off, or
    not this stack's business (a driver in the node image)?"""
    if exp.expected:
        source = f" (DaemonSet {exp.serving[0].ref} targets the node)" if exp.serving else ""
        return Verdict(
            False,
            "driver.pod-missing",
            f"node {name}: no NVIDIA driver pod runs there although the "
            f"{'GPU Operator' if OPERATOR in plan.stacks else 'cluster'} manages its driver{source}",
            values=_ds_values(exp.serving[0]) if exp.serving else {},
        )
    if exp.disabled and not exp.host:
        return Verdict(
            False,
            "driver.component-disabled",
            f"node {name}: the GPU Operator's driver is switched off there ({exp.disabled}) and "
            "no driver is loaded: no GPUs are advertised",
            values=_switch_values(exp.disabled, "NVIDIA driver"),
        )
    if exp.paused:
        return Verdict(
            False,
            "driver.upgrade-in-progress",
            f"node {name}: NVIDIA driver upgrade in progress ({exp.paused}); its GPUs return "
            "when the driver pod is back",
        )
    if plan.platform == "GKE" and GKE in plan.stacks and not exp.host:
        return Verdict(
            False,
            "driver.not-installed",
            f"node {name}: GKE does not install the driver on this node (no "
            "cloud.google.com/gke-gpu-driver-version label) and no NVIDIA driver installer "
            "pod runs there" + (f"; {_skipped_by(exp)}" if exp.skipping else ""),
        )
    return None


def _gfd_down(view: StackView, plan: NodePlan, node: str) -> str | None:
    """Why GPU feature discovery (which writes nvidia.com/gpu.product and friends) is not
    running on the node, or None when it runs or the node's stack has none."""
    exp = plan.role("gfd")
    state = component_state(view, node, "gfd")
    if state is not None:
        return None if state.ok else f"{ROLE_TITLES['gfd']} {state.text}"
    if exp.disabled:
        return f"{ROLE_TITLES['gfd']} is switched off there ({exp.disabled})"
    if exp.paused:
        return f"{ROLE_TITLES['gfd']} is paused ({exp.paused})"
    if exp.expected:
        return f"no {ROLE_TITLES['gfd']} pod runs there"
    return None


def _waiting_in(view: StackView, node: str, init: str) -> bool:
    """Some GPU component pod on the node is stuck in the init container `init`."""
    for pod in view.node_pods(node):
        for cs in (pod.get("status") or {}).get("initContainerStatuses") or []:
            if cs.get("name") == init and not (cs.get("state") or {}).get("terminated"):
                return True
    return False


def _mig_verdict(node: Obj, view: StackView) -> Verdict | None:
    lab = labels(node)
    state = lab.get("nvidia.com/mig.config.state")
    config = lab.get("nvidia.com/mig.config", "?")
    if state not in ("pending", "rebooting", "failed"):
        return None
    manager = component_state(view, name_of(node), "mig-manager")
    detail = manager.detail if manager is not None else []
    mgr = f"; {manager.text}" if manager is not None else ""
    pod = manager.pod if manager is not None else ""
    if state == "failed":
        return Verdict(
            False,
            "driver.mig-config-failed",
            f"node {name_of(node)}: MIG reconfiguration to {config} failed "
            f"(nvidia.com/mig.config.state=failed){mgr}",
            detail,
            pod,
        )
    return Verdict(
        False,
        "device-plugin.mig-reconfiguring",
        f"node {name_of(node)}: MIG reconfiguration to {config} in progress (state {state}); "
        f"its GPUs return when the mig-manager finishes{mgr}",
        detail,
        pod,
    )


def _plugin_verdict(
    node: Obj, view: StackView, plan: NodePlan, allocatable: dict[str, int]
) -> Verdict:
    name = name_of(node)
    mig = _mig_verdict(node, view)
    if mig is not None and mig.code.startswith("device-plugin."):
        return mig
    plugin = component_state(view, name, "device-plugin")
    exp = plan.role("device-plugin")
    if not any(v > 0 for v in allocatable.values()):
        if plugin is not None:
            return Verdict(
                False,
                "device-plugin.no-gpu-resource",
                f"node {name} advertises no NVIDIA GPUs in Allocatable; {plugin.text}",
                plugin.detail,
                plugin.pod,
            )
        if plan.dra_only:
            return Verdict(True, text="GPUs offered through DRA (no device plugin by design)")
        if is_gpu_node(node):
            return _plugin_absent(name, exp, plan)
        return Verdict(
            False,
            "device-plugin.no-gpu-resource",
            f"node {name} advertises no NVIDIA GPUs in Allocatable",
        )
    if plugin is not None and not plugin.ok:
        return _state_verdict("device-plugin.pod-failing", name, plugin, plugin.text)
    return Verdict(True, text="GPUs advertised")


def _plugin_absent(name: str, exp: Expectation, plan: NodePlan) -> Verdict:
    """A GPU node advertising no GPUs with no device-plugin pod: say why there is none."""
    head = f"node {name} advertises no NVIDIA GPUs in Allocatable"
    if exp.expected or (plan.inferred and OPERATOR in plan.stacks and not exp.disabled):
        source = f" (DaemonSet {exp.serving[0].ref} targets the node)" if exp.serving else ""
        return Verdict(
            False,
            "device-plugin.pod-missing",
            f"{head}; no device-plugin pod runs there{source}",
            values=_ds_values(exp.serving[0]) if exp.serving else {},
        )
    if exp.disabled:
        return Verdict(
            False,
            "device-plugin.component-disabled",
            f"{head}: the device plugin is switched off there ({exp.disabled}), so there is "
            "no plugin pod to restart",
            values=_switch_values(exp.disabled, "device plugin"),
        )
    if exp.paused:
        return Verdict(
            False, "device-plugin.paused", f"{head}: the device plugin is paused ({exp.paused})"
        )
    if exp.host:
        return Verdict(
            False,
            "device-plugin.host-plugin",
            f"{head}; its device plugin {exp.host}, outside Kubernetes: check it on the node",
        )
    if exp.skipping:
        comp, why = exp.skipping[0]
        return Verdict(
            False,
            "device-plugin.not-deployed",
            f"{head}: no device plugin runs there; {_skipped_by(exp)}",
            values={**_ds_values(comp), "skip_reason": why},
        )
    return Verdict(
        False,
        "device-plugin.not-installed",
        f"{head}: no NVIDIA device plugin is installed for it (no device-plugin DaemonSet of "
        "the GPU Operator, GKE or NVIDIA's k8s-device-plugin targets it)",
    )


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
        gpu_node=is_gpu_node(node),
        driver=_driver_verdict(node, view, plan, allocatable),
        plugin=_plugin_verdict(node, view, plan, allocatable),
        capacity=capacity,
        allocatable=allocatable,
        allocatable_all=resources((node.get("status") or {}).get("allocatable")),
        stack=plan.describe(),
        dra_only=plan.dra_only,
        gfd_down=_gfd_down(view, plan, name_of(node)),
    )
    mig = _mig_verdict(node, view)
    if mig is not None and mig.code.startswith("driver."):
        health.mig_failed = mig
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
        health.dra_only,
        health.mig_failed is not None,
        health.gfd_down is not None,
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
        and health.mig_failed is None
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
