"""NVIDIA: its devices, labels and components, as the engine needs to know them.

The GPU Operator (in whatever namespace it was installed: `gpu-operator`, OpenShift's
`nvidia-gpu-operator`, v1.x's `gpu-operator-resources`, a custom one) runs its operands as
DaemonSets owned by its ClusterPolicy; GKE runs its own driver installer and device plugin in
kube-system; EKS and AKS node images carry the driver, and NVIDIA's device plugin comes from a
static manifest or its Helm chart, in any namespace; Bottlerocket and EKS Auto Mode run the
plugin on the host; NVIDIA's DRA driver publishes ResourceSlices instead of extended
resources. GPU feature discovery writes the `nvidia.com/gpu.*` labels.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from triage.vendors.base import DriverUpgrade, Vendor

# Labels GPU feature discovery, the GPU Operator and the MIG manager write on a node.
PRESENT = "nvidia.com/gpu.present"
PRODUCT = "nvidia.com/gpu.product"
COUNT = "nvidia.com/gpu.count"
MEMORY = "nvidia.com/gpu.memory"
REPLICAS = "nvidia.com/gpu.replicas"  # GPU sharing: the shares each GPU is advertised as
SHARING = "nvidia.com/gpu.sharing-strategy"
DEPLOY = "nvidia.com/gpu.deploy."  # the GPU Operator's per-node switch of each operand
MIG_CAPABLE = "nvidia.com/mig.capable"
MIG_CONFIG = "nvidia.com/mig.config"  # the MIG layout asked of the MIG manager
MIG_CONFIG_STATE = "nvidia.com/mig.config.state"  # how applying it went
MIG_STRATEGY = "nvidia.com/mig.strategy"
GKE_NO_PLUGIN = "gke-no-default-nvidia-gpu-device-plugin"  # GKE: bring your own plugin
# The GPU Operator's driver upgrade controller (NVIDIA/k8s-operator-libs, driver "gpu"): the
# node's upgrade state, and when the wait for jobs and the validation began (Unix seconds).
UPGRADE_STATE = "nvidia.com/gpu-driver-upgrade-state"
UPGRADE_WAIT_SINCE = "nvidia.com/gpu-driver-upgrade-wait-for-pod-completion-start-time"
UPGRADE_VALIDATION_SINCE = "nvidia.com/gpu-driver-upgrade-validation-start-time"

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
OPERATOR_OWNERS = ("ClusterPolicy", "NVIDIADriver")
# Where the GPU Operator is usually installed: Helm's docs, OpenShift's OLM, v1.x operands.
OPERATOR_NAMESPACES = ("gpu-operator", "nvidia-gpu-operator", "gpu-operator-resources")
_DRA_NAMES = ("nvidia-dra-driver-gpu", "dra-driver-nvidia-gpu")


def classify(
    *, name: str, labels_: dict[str, str], owners: Iterable[str] = (), images: Iterable[str] = ()
) -> tuple[str, str] | None:
    """(stack, role) of a GPU component DaemonSet or pod; role "other" for components that do
    not decide whether a GPU pod can run (monitoring, sandbox); None for anything else."""
    app = labels_.get("app") or ""
    images = tuple(images)
    if any(o in OPERATOR_OWNERS for o in owners) or (
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
    if app_name in _DRA_NAMES or any("nvidia" in i and "dra-driver" in i for i in images):
        return (DRA, "dra-plugin") if "kubelet-plugin" in (name + component) else (DRA, "other")
    if (
        app_name == "nvidia-device-plugin"
        or labels_.get("name") in ("nvidia-device-plugin-ds", "nvidia-device-plugin")
        or k8s_app == "nvidia-device-plugin"
        or name.startswith("nvidia-device-plugin")
        or any("nvidia" in i and "k8s-device-plugin" in i for i in images)
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


GPU_NODE_LABELS = (
    (PRESENT, "true"),
    ("feature.node.kubernetes.io/pci-10de.present", "true"),
    ("cloud.google.com/gke-gpu", "true"),
    ("kubernetes.azure.com/accelerator", "nvidia"),
    ("karpenter.k8s.aws/instance-gpu-manufacturer", "nvidia"),
    ("eks.amazonaws.com/instance-gpu-manufacturer", "nvidia"),
)
GPU_NODE_KEYS = ("cloud.google.com/gke-accelerator", "k8s.amazonaws.com/accelerator")
# Instance types with NVIDIA GPUs, for nodes no GPU component has labelled yet (an EKS node
# whose device plugin never started): AWS P and G families (not AMD's g4ad or Graviton's
# g5g), GCP's accelerator-optimised A2/A3/A4/G2, Azure's NC and ND sizes.
GPU_INSTANCE_PREFIXES = (
    "p2.", "p3.", "p3dn.", "p4d.", "p4de.", "p5.", "p5e.", "p5en.", "p6-", "g4dn.", "g5.",
    "g6.", "g6e.", "g6f.", "gr6.", "a2-", "a3-", "a4-", "g2-", "Standard_NC", "Standard_ND",
)  # fmt: skip


# Messages the NVIDIA container stack prints when the driver or runtime is broken.
GPU_RUNTIME_ERROR = re.compile(
    r"nvidia-container-cli|nvml|driver not loaded|libnvidia|NVIDIA driver|"
    r"no runtime for \"?nvidia|RuntimeHandler \"?nvidia|nvidia-container-runtime|"
    r"could not select device driver \"\" with capabilities: \[\[gpu\]\]|"
    r"CDI devices? [^,;]*nvidia\.com/",
    re.IGNORECASE,
)
# What the NVIDIA container stack prints for each cause, most specific first. CDI: containerd
# or CRI-O (or nvidia-container-runtime in CDI mode) finds no spec for the device kubelet
# handed over ("unresolvable CDI devices nvidia.com/gpu=GPU-…", "failed to inject CDI
# devices"): the spec under /var/run/cdi is stale or missing. A driver whose kernel module and
# user-space libraries differ ("driver/library version mismatch"): the driver was upgraded
# under a loaded module. nvidia-container-cli failing to start at all (legacy mode): no driver
# loaded, no libnvidia-ml.
RUNTIME_CAUSES = (
    ("cdi", re.compile(r"unresolvable CDI devices?|failed to inject CDI devices|"
                       r"CDI device injection failed|failed to (?:get|refresh) CDI",
                       re.IGNORECASE)),
    ("version-mismatch", re.compile(r"driver/library version mismatch", re.IGNORECASE)),
    ("runtime-init", re.compile(r"nvidia-container-cli: (?:initialization|detection|mount) error|"
                                r"driver not loaded|libnvidia-ml\.so|nvml error",
                                re.IGNORECASE)),
)  # fmt: skip
# The RuntimeClasses the GPU Operator creates, by the mode of the runtime they select.
RUNTIME_MODES = {"nvidia-cdi": "CDI", "nvidia-legacy": "legacy"}


NVIDIA = Vendor(
    key="nvidia",
    name="NVIDIA",
    resource_prefix="nvidia.com/",
    device_resource="nvidia.com/gpu",
    partition_prefix="nvidia.com/mig-",
    feature_prefix="nvidia.com/",
    product_label=PRODUCT,
    count_label=COUNT,
    memory_label=MEMORY,
    node_signs=GPU_NODE_LABELS,
    node_sign_keys=GPU_NODE_KEYS,
    instance_prefixes=GPU_INSTANCE_PREFIXES,
    dra_drivers=("gpu.nvidia.com", "compute-domain.nvidia.com"),
    runtime_class="nvidia",
    runtime_errors=GPU_RUNTIME_ERROR,
    classify=lambda name, labels_, owners, images: classify(
        name=name, labels_=dict(labels_), owners=owners, images=images
    ),
    titles=ROLE_TITLES,
    stack_titles=STACK_TITLES,
    driver_upgrade=DriverUpgrade(
        state_label=UPGRADE_STATE,
        since={
            "wait-for-jobs-required": UPGRADE_WAIT_SINCE,
            "validation-required": UPGRADE_VALIDATION_SINCE,
        },
        policy="ClusterPolicy spec.driver.upgradePolicy",
        policy_kind="ClusterPolicy",
        wait_selector=("spec", "driver", "upgradePolicy", "waitForCompletion", "podSelector"),
    ),
    runtime_causes=RUNTIME_CAUSES,
    runtime_modes=RUNTIME_MODES,
)
