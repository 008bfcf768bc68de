"""What one node's GPU stack looks like: per role, which DaemonSets serve or skip the node, what
a label or the ClusterPolicy switches off, what the host provides (`NodePlan`, `Expectation`);
and which platform (GKE, EKS, AKS, OpenShift) a node runs on."""

from __future__ import annotations

from dataclasses import dataclass, field

from triage.cluster.objects import Obj, labels
from triage.layers.stacks.components import Component
from triage.vendors import STACK_TITLES, Vendor


@dataclass(slots=True)
class Expectation:
    """What one role looks like on one node."""

    role: str
    serving: list[Component] = field(default_factory=list)  # DaemonSets that target the node
    skipping: list[tuple[Component, str]] = field(default_factory=list)  # ... that skip it, why
    disabled: str | None = None  # the label or policy that switches the role off here
    paused: str | None = None  # the label that pauses it (driver upgrade, MIG change)
    host: str | None = None  # provided outside Kubernetes (node image, host service)
    expected: bool = False  # a pod of this role should run on the node


@dataclass(slots=True)
class NodePlan:
    """The GPU stack one node runs: which stacks serve it and what each role expects."""

    stacks: tuple[str, ...]
    platform: str | None
    roles: dict[str, Expectation]
    inferred: bool = False  # no DaemonSet templates to go by: judged from labels and pods
    # Every node-feature-discovery worker skips the node, and why: it carries no feature labels.
    nfd_skipping: list[tuple[Component, str]] = field(default_factory=list)
    vendors: tuple[Vendor, ...] = ()  # whose accelerators the node carries (`vendors_on`)

    @property
    def vendor(self) -> Vendor | None:
        """The vendor whose accelerators the node carries (the first of two), if any."""
        return self.vendors[0] if self.vendors else None

    def role(self, name: str) -> Expectation:
        return self.roles.get(name) or Expectation(name)

    @property
    def dra_only(self) -> bool:
        """GPUs reach pods only through DRA here: a DRA kubelet plugin and no device plugin."""
        plugin = self.role("device-plugin")
        return self.role("dra-plugin").expected and not plugin.expected and not plugin.host

    def describe(self) -> str:
        parts = [STACK_TITLES.get(s, s) for s in self.stacks]
        driver = self.role("driver")
        if driver.host:
            parts.append(f"driver {driver.host}")
        elif driver.disabled:
            parts.append(f"driver switched off ({driver.disabled})")
        plugin = self.role("device-plugin")
        if plugin.host:
            parts.append(f"device plugin {plugin.host}")
        text = ", ".join(parts) or "no GPU components found"
        return text + (f" ({self.platform})" if self.platform else "")


def platform_of(node: Obj) -> str | None:
    lab = labels(node)
    provider = str((node.get("spec") or {}).get("providerID") or "")
    if "cloud.google.com/gke-nodepool" in lab or "cloud.google.com/gke-accelerator" in lab:
        return "GKE"
    if lab.get("eks.amazonaws.com/compute-type") == "auto":
        return "EKS Auto Mode"
    if any(k.startswith(("eks.amazonaws.com/", "karpenter.k8s.aws/")) for k in lab):
        return "EKS"
    if any(k.startswith("kubernetes.azure.com/") for k in lab) or provider.startswith("azure://"):
        return "AKS"
    if "node.openshift.io/os_id" in lab:
        return "OpenShift"
    if provider.startswith("aws://"):
        return "AWS"
    return None


def host_plugin(node: Obj, platform: str | None) -> str | None:
    """Where the device plugin runs on the host itself, with no pod."""
    if platform == "EKS Auto Mode":
        return "runs on the host (EKS Auto Mode)"
    os_image = str(((node.get("status") or {}).get("nodeInfo") or {}).get("osImage") or "")
    if "bottlerocket" in os_image.lower():
        return "runs on the host (Bottlerocket's nvidia-k8s-device-plugin service)"
    return None


# How the driver reaches a node whose stack runs no driver pod, by platform.
HOST_DRIVER = {
    "EKS": "pre-installed (EKS accelerated AMI)",
    "EKS Auto Mode": "pre-installed (managed by EKS Auto Mode)",
    "AWS": "pre-installed (node image)",
    "AKS": "pre-installed (installed by AKS with the node image)",
}
