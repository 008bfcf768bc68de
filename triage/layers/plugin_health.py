"""The device-plugin layer on one node: does kubelet advertise the GPUs, and if not, is the plugin
failing, missing, switched off, paused, run on the host, or not installed for this stack at all?
Also what GPU sharing (time-slicing, MPS) does to the numbers."""

from __future__ import annotations

from triage.cluster.objects import Obj, labels, name_of
from triage.layers.driver_health import mig_verdict
from triage.layers.node_verdict import (
    NodeVerdict,
    ds_values,
    nfd_context,
    skipped_by,
    state_verdict,
    switch_values,
)
from triage.layers.stacks.plan import Expectation, NodePlan
from triage.layers.stacks.state import ComponentState, component_state, gpu_resources
from triage.layers.stacks.view import StackView
from triage.vendors import NVIDIA, Vendor
from triage.vendors.nvidia import COUNT, OPERATOR, REPLICAS, SHARING


def plugin_verdict(
    node: Obj, view: StackView, plan: NodePlan, allocatable: dict[str, int]
) -> NodeVerdict:
    name = name_of(node)
    found = plan.vendor or NVIDIA
    vendor = found.devices  # "NVIDIA GPUs", "AWS Neuron devices"
    mig = mig_verdict(node, view)
    if mig is not None and mig.code.startswith("device-plugin."):
        return mig
    plugin = component_state(view, name, "device-plugin")
    exp = plan.role("device-plugin")
    if not any(v > 0 for v in allocatable.values()):
        registered = _registered_before(node, view, plugin)
        if registered is not None:
            return registered
        if plugin is not None:
            return NodeVerdict(
                False,
                "device-plugin.no-gpu-resource",
                f"node {name} advertises no {vendor} in Allocatable; {plugin.text}",
                plugin.detail,
                plugin.pod,
            )
        if plan.dra_only:
            return NodeVerdict(True, text="GPUs offered through DRA (no device plugin by design)")
        if plan.vendors:
            return _plugin_absent(name, exp, plan, found)
        return NodeVerdict(
            False,
            "device-plugin.no-gpu-resource",
            f"node {name} advertises no {vendor} in Allocatable",
        )
    if plugin is not None and not plugin.ok:
        return state_verdict("device-plugin.pod-failing", name, plugin, plugin.text)
    return NodeVerdict(True, text="GPUs advertised")


def _registered_before(node: Obj, view: StackView, plugin: ComponentState | None
                       ) -> NodeVerdict | None:  # fmt: skip
    """A device plugin that runs, on a node whose kubelet knows the resource (it is in
    capacity, registered once) but offers none of it: the plugin is not registered with
    kubelet now (after a kubelet restart it must register again; until then the checkpoint's
    devices count as unhealthy, then drop to 0). Not a crash: its pod runs."""
    if plugin is None or not plugin.ok:
        return None
    capacity = gpu_resources(node, key="capacity")
    known = sorted(r for r in capacity if not r.endswith(".shared"))
    if not known:
        return None  # never registered here: a node joining, or a plugin finding no device
    name = name_of(node)
    res = known[0]
    pods = view.pods(name, "device-plugin")
    restarts = sum(
        int(cs.get("restartCount") or 0)
        for p in pods
        for cs in (p.get("status") or {}).get("containerStatuses") or []
    )
    alloc = gpu_resources(node, key="allocatable").get(res, 0)
    return NodeVerdict(
        False,
        "device-plugin.not-registered",
        f"node {name} offers 0 {res} (status.capacity {capacity[res]}, status.allocatable "
        f"{alloc}) while its device-plugin pod {plugin.pod} is Running with {restarts} "
        "restart(s): the plugin is not registered with kubelet (it must register again after "
        "every kubelet restart)",
        pod=plugin.pod,
    )


def _plugin_absent(name: str, exp: Expectation, plan: NodePlan, vendor: Vendor) -> NodeVerdict:
    """A GPU node advertising no GPUs with no device-plugin pod: say why there is none."""
    head = f"node {name} advertises no {vendor.devices} in Allocatable"
    if exp.expected or (plan.inferred and OPERATOR in plan.stacks and not exp.disabled):
        source = f" (DaemonSet {exp.serving[0].ref} targets the node)" if exp.serving else ""
        return NodeVerdict(
            False,
            "device-plugin.pod-missing",
            f"{head}; no device-plugin pod runs there{source}",
            values=ds_values(exp.serving[0]) if exp.serving else {},
        )
    if exp.disabled:
        return NodeVerdict(
            False,
            "device-plugin.component-disabled",
            f"{head}: the device plugin is switched off there ({exp.disabled}), so there is "
            "no plugin pod to restart",
            values=switch_values(exp.disabled, "device plugin"),
        )
    if exp.paused:
        return NodeVerdict(
            False, "device-plugin.paused", f"{head}: the device plugin is paused ({exp.paused})"
        )
    if exp.host:
        return NodeVerdict(
            False,
            "device-plugin.host-plugin",
            f"{head}; its device plugin {exp.host}, outside Kubernetes: check it on the node",
        )
    if exp.skipping:
        comp, why = exp.skipping[0]
        return NodeVerdict(
            False,
            "device-plugin.not-deployed",
            f"{head}: no device plugin runs there; {skipped_by(exp)}",
            detail=nfd_context(plan, vendor),
            values={**ds_values(comp), "skip_reason": why},
        )
    where = (
        f"the GPU Operator, GKE or {vendor.name}'s k8s-device-plugin" if vendor is NVIDIA
        else "its stack"
    )  # fmt: skip
    return NodeVerdict(
        False,
        "device-plugin.not-installed",
        f"{head}: no {vendor.name} device plugin is installed for it (no device-plugin DaemonSet "
        f"of {where} targets it)",
    )


def sharing_note(node: Obj) -> str | None:
    """Time-slicing / MPS: allocatable counts replicas, not physical GPUs. That is expected."""
    lab = labels(node)
    replicas = lab.get(REPLICAS)
    strategy = lab.get(SHARING)
    if not replicas or strategy == "none" or (replicas in ("0", "1") and not strategy):
        return None  # GPU feature discovery writes sharing-strategy=none on unshared GPUs
    count = lab.get(COUNT, "?")
    return (
        f"node {name_of(node)} shares its {count} GPU(s) by {strategy or 'time-slicing'} "
        f"with {replicas} replicas each: allocatable counts shares, not physical GPUs"
    )
