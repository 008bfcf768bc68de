"""The driver layer on one node: is a driver loaded (by the GPU Operator, GKE's installer or the
node image), is the container toolkit configured, did the operator's validator pass, did a MIG
reconfiguration fail? Also whether GPU feature discovery runs there (its labels feed placement)."""

from __future__ import annotations

from triage.cluster.objects import Obj, labels, name_of
from triage.layers.node_verdict import (
    NodeVerdict,
    ds_values,
    nfd_context,
    skipped_by,
    stack_text,
    state_verdict,
    switch_values,
)
from triage.layers.stacks.plan import Expectation, NodePlan
from triage.layers.stacks.state import component_state, failing_validation, node_ready
from triage.layers.stacks.view import StackView
from triage.layers.upgrade import upgrade_verdict
from triage.vendors import NVIDIA, Vendor
from triage.vendors.nvidia import GKE, MIG_CONFIG, MIG_CONFIG_STATE, OPERATOR, ROLE_TITLES


def driver_verdict(
    node: Obj, view: StackView, plan: NodePlan, allocatable: dict[str, int]
) -> NodeVerdict:
    name = name_of(node)
    ready, why = node_ready(node)
    if not ready:
        return NodeVerdict(False, "driver.node-not-ready", f"node {name} is not Ready: {why}")
    if not plan.vendors:
        return NodeVerdict(True, text="not a GPU node")
    vendor = plan.vendor or NVIDIA
    exp = plan.role("driver")
    has_gpus = any(v > 0 for v in allocatable.values())
    driver = component_state(view, name, "driver")
    title = stack_text(exp, "driver installer" if GKE in plan.stacks else "driver", vendor)
    upgrading = upgrade_verdict(node, has_gpus=has_gpus, driver=driver)
    if upgrading is not None:  # cordoned or restarting on purpose: the upgrade is the answer
        return upgrading
    if driver is not None and not driver.ok:
        text = driver.text.replace("driver pod", f"{title} pod", 1)
        return state_verdict("driver.pod-failing", name, driver, text)
    if driver is None and not has_gpus:
        missing = _driver_missing(name, exp, plan, vendor)
        if missing is not None:
            return missing
    toolkit = component_state(view, name, "toolkit")
    if toolkit is not None and not toolkit.ok:
        return state_verdict(
            "driver.toolkit-failing",
            name,
            toolkit,
            f"{vendor.name} container {toolkit.text} (runtime not configured for GPUs)",
        )
    stuck = failing_validation(view, name)
    if stuck in ("driver-validation", "toolkit-validation", "cuda-validation") and not has_gpus:
        return NodeVerdict(
            False,
            "driver.validation-failed",
            f"node {name}: operator validator stuck at {stuck} and no GPUs advertised",
        )
    off = plan.role("toolkit").disabled
    if off and not has_gpus and _waiting_in(view, name, "toolkit-validation"):
        return NodeVerdict(
            False,
            "driver.component-disabled",
            f"node {name}: the {vendor.name} container toolkit is switched off there ({off}) and the "
            "GPU components wait for it: nothing configures the container runtime for GPUs",
            values=switch_values(off, vendor.title("toolkit")),
        )
    if exp.host:
        return NodeVerdict(True, text=f"driver {exp.host}, healthy")
    return NodeVerdict(
        True, text="driver operator-managed, healthy" if driver else "driver healthy"
    )


def _driver_missing(
    name: str, exp: Expectation, plan: NodePlan, vendor: Vendor
) -> NodeVerdict | None:
    """No driver pod on a GPU node that advertises no GPUs: is one missing, switched off, or
    not this stack's business (a driver in the node image)?"""
    if exp.expected:
        source = f" (DaemonSet {exp.serving[0].ref} targets the node)" if exp.serving else ""
        return NodeVerdict(
            False,
            "driver.pod-missing",
            f"node {name}: no {vendor.name} driver pod runs there although the "
            f"{'GPU Operator' if OPERATOR in plan.stacks else 'cluster'} manages its driver{source}",
            values=ds_values(exp.serving[0]) if exp.serving else {},
        )
    if exp.disabled and not exp.host:
        return NodeVerdict(
            False,
            "driver.component-disabled",
            f"node {name}: the GPU Operator's driver is switched off there ({exp.disabled}) and "
            "no driver is loaded: no GPUs are advertised",
            values=switch_values(exp.disabled, vendor.title("driver")),
        )
    if exp.paused:
        return NodeVerdict(
            False,
            "driver.upgrade-in-progress",
            f"node {name}: {vendor.name} driver upgrade in progress ({exp.paused}); its GPUs return "
            "when the driver pod is back",
        )
    unreached = [(c, why) for c, why in exp.skipping if c.stack == OPERATOR]
    if unreached and not exp.host and not exp.serving:
        comp, why = unreached[0]
        return NodeVerdict(
            False,
            "driver.not-deployed",
            f"node {name}: no {vendor.name} driver is loaded and the GPU Operator's driver "
            f"DaemonSet {comp.ref} does not reach the node: {why}",
            detail=nfd_context(plan, vendor),
            values={**ds_values(comp), "skip_reason": why},
        )
    if plan.platform == "GKE" and GKE in plan.stacks and not exp.host:
        return NodeVerdict(
            False,
            "driver.not-installed",
            f"node {name}: GKE does not install the driver on this node (no "
            f"cloud.google.com/gke-gpu-driver-version label) and no {vendor.name} driver installer "
            "pod runs there" + (f"; {skipped_by(exp)}" if exp.skipping else ""),
        )
    return None


def gfd_down(view: StackView, plan: NodePlan, node: str) -> str | None:
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


def mig_verdict(node: Obj, view: StackView) -> NodeVerdict | None:
    lab = labels(node)
    state = lab.get(MIG_CONFIG_STATE)
    config = lab.get(MIG_CONFIG, "?")
    if state not in ("pending", "rebooting", "failed"):
        return None
    manager = component_state(view, name_of(node), "mig-manager")
    detail = manager.detail if manager is not None else []
    mgr = f"; {manager.text}" if manager is not None else ""
    pod = manager.pod if manager is not None else ""
    if state == "failed":
        return NodeVerdict(
            False,
            "driver.mig-config-failed",
            f"node {name_of(node)}: MIG reconfiguration to {config} failed "
            f"({MIG_CONFIG_STATE}=failed){mgr}",
            detail,
            pod,
        )
    return NodeVerdict(
        False,
        "device-plugin.mig-reconfiguring",
        f"node {name_of(node)}: MIG reconfiguration to {config} in progress (state {state}); "
        f"its GPUs return when the mig-manager finishes{mgr}",
        detail,
        pod,
    )
