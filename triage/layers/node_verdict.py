"""What a node-level layer (driver, device plugin) says about one node: a `NodeVerdict`, and the
helpers that word it and fill the playbook's placeholders."""

from __future__ import annotations

from dataclasses import dataclass, field

from triage.layers.stacks.components import Component
from triage.layers.stacks.plan import Expectation, NodePlan
from triage.layers.stacks.state import ComponentState
from triage.vendors import NVIDIA, Vendor
from triage.vendors.nvidia import DEPLOY, GKE, OPERATOR


@dataclass(slots=True)
class NodeVerdict:
    ok: bool
    code: str = ""
    text: str = ""
    detail: list[str] = field(default_factory=list)
    pod: str = ""  # "namespace/name" of the component pod at fault, if one is
    values: dict[str, str] = field(default_factory=dict)  # playbook placeholders it fills


def stack_text(exp: Expectation, default: str, vendor: Vendor = NVIDIA) -> str:
    """How a node's component is named: "GKE driver installer", "NVIDIA driver"."""
    stacks = {c.stack for c in exp.serving}
    if GKE in stacks:
        return f"GKE {default}"
    if OPERATOR in stacks or not stacks or vendor is not NVIDIA:
        return f"{vendor.name} {default}"
    return default


def state_verdict(code: str, name: str, state: ComponentState, text: str) -> NodeVerdict:
    return NodeVerdict(False, code, f"node {name}: {text}", state.detail, state.pod)


def ds_values(comp: Component) -> dict[str, str]:
    return {"daemonset_namespace": comp.namespace, "daemonset_name": comp.name,
            "component_namespace": comp.namespace}  # fmt: skip


def switch_values(setting: str, component: str) -> dict[str, str]:
    """What the playbook needs to say how to switch a component back on."""
    out = {"setting": setting, "component": component}
    key, _, value = setting.partition("=")
    if key.startswith(DEPLOY) and value == "false":
        out["switch_key"] = key
    return out


def skipped_by(exp: Expectation) -> str:
    return "; ".join(f"DaemonSet {c.ref} skips it: {why}" for c, why in exp.skipping[:3])


def nfd_context(plan: NodePlan, vendor: Vendor = NVIDIA) -> list[str]:
    """Why the node carries no feature-discovery labels: every node-feature-discovery worker
    skips it (named, with why), so nothing labels its PCI devices and the operator that labels
    GPU nodes from them never marks it (no `<vendor>gpu.*` labels, no operand targets it)."""
    return [
        f"DaemonSet {c.ref} (node-feature-discovery worker) skips the node too: {why}; so the "
        f"node has no feature.node.kubernetes.io/* labels and no {vendor.feature_prefix}* "
        "labels from them"
        for c, why in plan.nfd_skipping[:2]
    ]
