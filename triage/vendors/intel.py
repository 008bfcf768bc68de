"""Intel's accelerators: Gaudi (`habana.ai/gaudi`) and data-center GPUs (`gpu.intel.com/i915`,
`gpu.intel.com/xe`).

Gaudi's device plugin runs as `habanalabs-device-plugin-daemonset` (namespace
`habana-system`), or under the Intel Gaudi Base Operator with its driver installer, container
runtime and feature discovery; NFD's PCI vendor label (`1da3`) and Intel's NFD rules
(`intel.feature.node.kubernetes.io/gaudi`) say a node carries Gaudi. The GPU plugin runs as
`intel-gpu-plugin` (plain manifest) or `intel-gpu-plugin-<name>` under the device-plugins
operator (`inteldeviceplugins-system`, a `GpuDevicePlugin`); it keeps running when it finds no
GPU, so a node showing none with a Running plugin is the signal. The driver is in the host.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from triage.vendors.base import Vendor

GAUDI_STACK, GAUDI_OPERATOR = "habana-device-plugin", "gaudi-operator"
GPU_STACK = "intel-gpu-plugin"


def classify_gaudi(
    name: str, labels: Mapping[str, str], owners: Iterable[str], images: Iterable[str]
) -> tuple[str, str] | None:
    images = tuple(images)
    if any("habana-ai-operator/" in i for i in images):
        for word, role in (("driver", "driver"), ("feature-discovery", "gfd"),
                           ("device-plugin", "device-plugin"), ("runtime", "toolkit")):  # fmt: skip
            if any(word in i for i in images):
                return GAUDI_OPERATOR, role
        return GAUDI_OPERATOR, "other"
    if (
        name.startswith("habanalabs-device-plugin")
        or labels.get("name") == "habanalabs-device-plugin-ds"
        or any("docker-k8s-device-plugin" in i and "habana" in i for i in images)
    ):
        return GAUDI_STACK, "device-plugin"
    return None


def classify_gpu(
    name: str, labels: Mapping[str, str], owners: Iterable[str], images: Iterable[str]
) -> tuple[str, str] | None:
    if (
        "GpuDevicePlugin" in owners
        or labels.get("app") == "intel-gpu-plugin"
        or name.startswith("intel-gpu-plugin")
        or any("intel-gpu-plugin" in i for i in images)
    ):
        return GPU_STACK, "device-plugin"
    return None


GAUDI = Vendor(
    key="intel-gaudi",
    name="Intel Gaudi",
    device_word="accelerator",
    resource_prefix="habana.ai/",
    device_resource="habana.ai/gaudi",
    partition_prefix=None,
    feature_prefix="habana.ai/",
    product_label="habana.ai/device.type",
    count_label="",
    memory_label="",
    node_signs=(
        ("feature.node.kubernetes.io/pci-1da3.present", "true"),
        ("feature.node.kubernetes.io/pci-1200_1da3.present", "true"),
        ("intel.feature.node.kubernetes.io/gaudi", "true"),
    ),
    instance_prefixes=("dl1.",),
    runtime_errors=re.compile(r"Device acquire failed|hlml|habanalabs|hl-smi", re.IGNORECASE),
    classify=classify_gaudi,
    titles={
        "driver": "Intel Gaudi driver",
        "device-plugin": "Intel Gaudi device plugin",
        "gfd": "Intel Gaudi feature discovery",
        "toolkit": "Habana container runtime",
    },
    stack_titles={
        GAUDI_STACK: "Intel Gaudi device plugin",
        GAUDI_OPERATOR: "Intel Gaudi Base Operator",
    },
)

INTEL_GPU = Vendor(
    key="intel-gpu",
    name="Intel",
    resource_prefix="gpu.intel.com/",
    device_resource="gpu.intel.com/i915",
    partition_prefix=None,
    feature_prefix="gpu.intel.com/",
    product_label="gpu.intel.com/product",
    count_label="gpu.intel.com/device.count",
    memory_label="gpu.intel.com/memory.max",
    node_signs=(
        ("intel.feature.node.kubernetes.io/gpu", "true"),
        ("feature.node.kubernetes.io/pci-0380_8086.present", "true"),
    ),
    node_sign_keys=("gpu.intel.com/product", "gpu.intel.com/family", "gpu.intel.com/device.count"),
    runtime_errors=re.compile(r"level_zero|ze_init|ZE_RESULT_ERROR|/dev/dri/render", re.IGNORECASE),
    classify=classify_gpu,
    titles={"device-plugin": "Intel GPU device plugin"},
    stack_titles={GPU_STACK: "Intel GPU device plugin"},
)
