"""The GPU components a cluster runs, recognised from their DaemonSets and pods.

Clusters do not follow one layout. The GPU Operator runs in any namespace (`gpu-operator`,
OpenShift's `nvidia-gpu-operator`, v1.x's `gpu-operator-resources`, a custom one); GKE runs its
own driver installer and device plugin in kube-system; EKS and AKS node images carry the driver
and NVIDIA's device plugin comes from a static manifest or its Helm chart, in any namespace;
Bottlerocket and EKS Auto Mode run the plugin on the host, with no pod at all; NVIDIA's DRA
driver publishes ResourceSlices instead of extended resources.

The DaemonSets say which components exist, and their node selectors, affinity and tolerations
say which nodes each one serves: that, never a default namespace, decides which pods a node
should have. Without DaemonSets to read (a snapshot of pods only), the pods' own labels stand
in, and the nodes' labels decide.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from triage.cluster.objects import Obj, labels, meta, name_of, ns_of
from triage.cluster.selectors import node_selector_term_matches, taint_str, tolerates

OPERATOR, GKE, PLUGIN, DRA = "gpu-operator", "gke", "device-plugin", "dra-driver"
STACK_TITLES = {
    OPERATOR: "NVIDIA GPU Operator",
    GKE: "GKE-managed GPU driver and device plugin",
    PLUGIN: "NVIDIA device plugin",
    DRA: "NVIDIA DRA driver",
}

# Roles, and the GPU Operator's per-node switch for each (nvidia.com/gpu.deploy.<key>).
DEPLOY_KEY = {
    "driver": "driver",
    "toolkit": "container-toolkit",
    "device-plugin": "device-plugin",
    "validator": "operator-validator",
    "gfd": "gpu-feature-discovery",
    "dcgm-exporter": "dcgm-exporter",
    "mig-manager": "mig-manager",
}
ROLE_TITLES = {
    "driver": "NVIDIA driver",
    "toolkit": "NVIDIA container toolkit",
    "device-plugin": "device plugin",
    "validator": "operator validator",
    "gfd": "GPU feature discovery",
    "dcgm-exporter": "DCGM exporter",
    "mig-manager": "MIG manager",
    "dra-plugin": "DRA kubelet plugin",
}

# The GPU Operator's operand DaemonSets, by their `app` label (= DaemonSet name).
_OPERANDS = {
    "nvidia-driver-daemonset": "driver",
    "nvidia-vgpu-manager-daemonset": "driver",
    "nvidia-container-toolkit-daemonset": "toolkit",
    "nvidia-device-plugin-daemonset": "device-plugin",
    "nvidia-operator-validator": "validator",
    "gpu-feature-discovery": "gfd",
    "nvidia-dcgm-exporter": "dcgm-exporter",
    "nvidia-mig-manager": "mig-manager",
}
_OPERATOR_OTHER = (  # operands that never decide whether a node can run a GPU pod
    "nvidia-dcgm", "nvidia-node-status-exporter", "nvidia-device-plugin-mps-control-daemon",
    "nvidia-sandbox-", "nvidia-vfio-manager", "nvidia-vgpu-device-manager",
    "nvidia-kata-manager", "nvidia-cc-manager",
)  # fmt: skip
_OPERATOR_OWNERS = ("ClusterPolicy", "NVIDIADriver")
_DRA_NAMES = ("nvidia-dra-driver-gpu", "dra-driver-nvidia-gpu")

# Taints a DaemonSet's pods tolerate without saying so (the DaemonSet controller adds them).
_DS_TOLERATED = "node.kubernetes.io/"


def classify(
    *, name: str, labels_: dict[str, str], owners: Iterable[str] = (), images: Iterable[str] = ()
) -> tuple[str, str] | None:
    """(stack, role) of a GPU component DaemonSet or pod; role "other" for components that do
    not decide whether a GPU pod can run (monitoring, sandbox); None for anything else."""
    app = labels_.get("app") or ""
    images = tuple(images)
    if any(o in _OPERATOR_OWNERS for o in owners) or (
        labels_.get("app.kubernetes.io/managed-by") == "gpu-operator"
        and (app in _OPERANDS or app.startswith(_OPERATOR_OTHER))
    ):
        return OPERATOR, _operand_role(name, app, labels_)
    if labels_.get("app.kubernetes.io/component") in ("nvidia-driver", "nvidia-vgpu-manager"):
        return OPERATOR, "driver"
    if app in _OPERANDS or name.startswith("nvidia-driver-daemonset"):
        # The static device-plugin manifest uses the same name, but labels `name=`, not `app=`.
        return OPERATOR, _operand_role(name, app, labels_)
    if app.startswith(_OPERATOR_OTHER):
        return OPERATOR, "other"
    k8s_app = labels_.get("k8s-app") or ""
    if k8s_app == "nvidia-gpu-device-plugin" or name.startswith("nvidia-gpu-device-plugin"):
        return GKE, "device-plugin"
    if k8s_app == "nvidia-driver-installer" or name.startswith("nvidia-driver-installer"):
        return GKE, "driver"
    app_name = labels_.get("app.kubernetes.io/name") or ""
    component = next((v for k, v in labels_.items() if k.endswith("-component")), "")
    if app_name in _DRA_NAMES or any("dra-driver" in i for i in images):
        return (DRA, "dra-plugin") if "kubelet-plugin" in (name + component) else (DRA, "other")
    if (
        app_name == "nvidia-device-plugin"
        or labels_.get("name") in ("nvidia-device-plugin-ds", "nvidia-device-plugin")
        or k8s_app == "nvidia-device-plugin"
        or name.startswith("nvidia-device-plugin")
        or any("k8s-device-plugin" in i for i in images)
    ):
        if "gpu-feature-discovery" in name:
            return PLUGIN, "gfd"
        if "mps-control-daemon" in name:
            return PLUGIN, "other"
        return PLUGIN, "device-plugin"
    return None


def _operand_role(name: str, app: str, labels_: dict[str, str]) -> str:
    if labels_.get("app.kubernetes.io/component") in ("nvidia-driver", "nvidia-vgpu-manager"):
        return "driver"
    for key in (app, name):
        if key in _OPERANDS:
            return _OPERANDS[key]
    for prefix, role in _OPERANDS.items():
        if name.startswith(prefix + "-") and not name.startswith(_OPERATOR_OTHER):
            return role
    return "other"


def pod_component(pod: Obj) -> tuple[str, str] | None:
    """(stack, role) of a pod judged by its own labels and name (no DaemonSet to go by)."""
    lab = labels(pod)
    name = name_of(pod)
    images = [c.get("image", "") for c in (pod.get("spec") or {}).get("containers") or []]
    found = classify(name=name, labels_=lab, images=images)
    if found is not None:
        return found
    # Pod names are the DaemonSet's plus a suffix; the operator's labels say `app=<ds name>`.
    base = name.rsplit("-", 1)[0]
    return classify(name=base, labels_={}, images=()) if base != name else None


def _canon(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True, slots=True)
class Component:
    """One GPU component: a DaemonSet (or, without DaemonSets, the pods of one)."""

    stack: str
    role: str
    namespace: str
    name: str
    how: str  # how it was recognised, for the report
    # The pod template's placement as canonical JSON (what equality compares: a DaemonSet's
    # status changes every time one of its pods does), and parsed; None when unknown.
    placement: str | None = None
    parsed: dict[str, Any] | None = field(default=None, compare=False, repr=False)

    @property
    def ref(self) -> str:
        return f"{self.namespace}/{self.name}"

    @classmethod
    def of_daemonset(cls, ds: Obj) -> Component | None:
        owners = [str(r.get("kind")) for r in meta(ds).get("ownerReferences") or []]
        tpl = ((ds.get("spec") or {}).get("template") or {}).get("spec") or {}
        images = [c.get("image", "") for c in tpl.get("containers") or []]
        tpl_meta = ((ds.get("spec") or {}).get("template") or {}).get("metadata") or {}
        lab = {**(tpl_meta.get("labels") or {}), **labels(ds)}
        found = classify(name=name_of(ds), labels_=lab, owners=owners, images=images)
        if found is None:
            return None
        how = f"owned by {owners[0]}" if owners and owners[0] in _OPERATOR_OWNERS else "name"
        parsed = None
        if tpl:
            parsed = {
                "nodeSelector": tpl.get("nodeSelector") or {},
                "terms": (
                    ((tpl.get("affinity") or {}).get("nodeAffinity") or {}).get(
                        "requiredDuringSchedulingIgnoredDuringExecution"
                    )
                    or {}
                ).get("nodeSelectorTerms"),
                "tolerations": tpl.get("tolerations") or [],
            }
        placement = _canon(parsed) if parsed is not None else None
        return cls(found[0], found[1], ns_of(ds), name_of(ds), how, placement, parsed)

    def skips(self, node: Obj) -> str | None:
        """Why this DaemonSet puts no pod on `node` (None: it does; also None when unknown)."""
        p = self.parsed
        if p is None:
            return None
        node_labels = labels(node)
        for k, v in p["nodeSelector"].items():
            if node_labels.get(k) != v:
                have = node_labels.get(k)
                got = f"node has {k}={have}" if have is not None else "node lacks the label"
                return f"its nodeSelector wants {k}={v} ({got})"
        terms = p["terms"]
        if terms and not any(node_selector_term_matches(t, node) for t in terms):
            return "its required node affinity does not match the node's labels"
        tolerations = p["tolerations"]
        for taint in (node.get("spec") or {}).get("taints") or []:
            if taint.get("effect") not in ("NoSchedule", "NoExecute"):
                continue
            if str(taint.get("key", "")).startswith(_DS_TOLERATED):
                continue
            if not tolerates(tolerations, taint):
                return f"it does not tolerate the node's taint {taint_str(taint)}"
        return None


def pinned_node(pod: Obj) -> str | None:
    """The node a DaemonSet pod is meant for: its nodeName, or (still Pending) the node its
    `matchFields metadata.name` affinity pins it to."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return str(spec["nodeName"])
    aff = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    ) or {}
    for term in aff.get("nodeSelectorTerms") or []:
        for f in term.get("matchFields") or []:
            if f.get("key") == "metadata.name" and f.get("values"):
                return str(f["values"][0])
    return None
