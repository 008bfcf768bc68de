"""AMD Instinct and Radeon GPUs: `amd.com/gpu`, the AMD GPU Operator and ROCm's own plugin.

The AMD GPU Operator (namespace `kube-amd-gpu` by default) runs its operands as DaemonSets
owned by a `DeviceConfig` and named after it (`<config>-device-plugin`, `-node-labeller`,
`-metrics-exporter`, `-dra-driver`); the amdgpu driver is loaded by Kernel Module Management,
one worker pod per node (`kmm-worker-<node>-<module>`), and every operand waits for the
node's `kmm.node.kubernetes.io/<ns>.<module>.ready` label: a node whose driver did not load
runs no plugin at all. Without the operator, ROCm's k8s-device-plugin runs as
`amdgpu-device-plugin-daemonset` (or the Helm chart's `amd-gpu-device-plugin-daemonset`) with
its node labeller, on nodes whose driver is in the image. NFD's PCI vendor label (`1002`), the
operator's NFD rule and the labeller's `amd.com/gpu.*` labels say a node carries AMD GPUs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from triage.vendors.base import Vendor

OPERATOR, PLUGIN = "amd-gpu-operator", "rocm-device-plugin"
STACK_TITLES = {OPERATOR: "AMD GPU Operator", PLUGIN: "ROCm device plugin"}
ROLE_TITLES = {
    "driver": "AMD GPU driver (amdgpu)",
    "device-plugin": "AMD GPU device plugin",
    "gfd": "AMD GPU node labeller",
    "dra-plugin": "AMD GPU DRA kubelet plugin",
}
_OPERANDS = {
    "-device-plugin": "device-plugin",
    "-node-labeller": "gfd",
    "-dra-driver": "dra-plugin",
}
_PLUGIN_NAMES = ("amdgpu-device-plugin", "amd-gpu-device-plugin")
_LABELLER_NAMES = ("amdgpu-labeller", "amd-gpu-labeller")


def classify(
    name: str, labels: Mapping[str, str], owners: Iterable[str], images: Iterable[str]
) -> tuple[str, str] | None:
    images = tuple(images)
    if "DeviceConfig" in owners:
        return OPERATOR, next((r for s, r in _OPERANDS.items() if name.endswith(s)), "other")
    if labels.get("app.kubernetes.io/name") == "kmm" and any(
        "rocm/" in i or "amdgpu" in i for i in images
    ):  # Kernel Module Management, as the operator runs it: a worker loads amdgpu on a node
        worker = labels.get("app.kubernetes.io/component") == "worker"
        return OPERATOR, "driver" if worker else "other"
    operand = labels.get("daemonset-name")
    if operand and any("rocm/" in i for i in images):
        base = name.rsplit("-", 1)[0]  # the DaemonSet's name, when it is a pod's
        role = next((r for s, r in _OPERANDS.items() if name.endswith(s) or base.endswith(s)), None)
        if role is None and any("rocm/k8s-device-plugin" in i for i in images):
            role = "gfd" if any("labeller" in i for i in images) else "device-plugin"
        return OPERATOR, role or "other"
    plugin_image = any("rocm/k8s-device-plugin" in i for i in images)
    if name.startswith(_LABELLER_NAMES) or labels.get("name") in ("amdgpu-lr-ds", "amd-gpu-lr-ds"):
        return PLUGIN, "gfd"
    if name.startswith(_PLUGIN_NAMES) or labels.get("name") in ("amdgpu-dp-ds", "amd-gpu-dp-ds"):
        return PLUGIN, "device-plugin"
    if plugin_image:
        return PLUGIN, "gfd" if any("labeller" in i for i in images) else "device-plugin"
    return None


AMD = Vendor(
    key="amd",
    name="AMD",
    resource_prefix="amd.com/",
    device_resource="amd.com/gpu",
    partition_prefix=None,
    feature_prefix="amd.com/gpu.",
    product_label="amd.com/gpu.product-name",
    count_label="",
    memory_label="amd.com/gpu.vram",
    node_signs=(
        ("feature.node.kubernetes.io/amd-gpu", "true"),
        ("feature.node.kubernetes.io/amd-vgpu", "true"),
        ("feature.node.kubernetes.io/pci-1002.present", "true"),
        ("feature.node.kubernetes.io/pci-0380_1002.present", "true"),
        ("feature.node.kubernetes.io/pci-1200_1002.present", "true"),
        ("kubernetes.azure.com/accelerator", "amd"),
    ),
    node_sign_keys=("amd.com/gpu.device-id", "amd.com/gpu.family", "beta.amd.com/gpu.family"),
    instance_prefixes=("Standard_ND96isr_MI300X", "BM.GPU.MI300X"),
    runtime_errors=re.compile(
        r"/dev/kfd|amdgpu driver|hsa_init|HSA_STATUS_ERROR|rocm-smi|Unable to open /dev/dri",
        re.IGNORECASE,
    ),
    classify=classify,
    titles=ROLE_TITLES,
    stack_titles=STACK_TITLES,
)
