"""Cloud accelerators: AWS Neuron (Inferentia, Trainium) on EKS and Google TPUs on GKE.

Neuron's device plugin runs in kube-system as `neuron-device-plugin-daemonset` (the static
manifest) or `neuron-device-plugin` (the Helm chart), on inf/trn instance types, advertising
`aws.amazon.com/neuroncore`, `aws.amazon.com/neurondevice` and the legacy
`aws.amazon.com/neuron`; the driver is in the node image (the EKS Neuron AMI). GKE runs its
own TPU device plugin (`tpu-device-plugin`, kube-system) on TPU node pools, labelled with
the accelerator and the slice topology; a multi-host slice is a node pool whose pods must
select that topology and ask every chip of each host.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from triage.vendors.base import Vendor

NEURON_STACK, TPU_STACK = "neuron-device-plugin", "gke-tpu"
TPU_ACCELERATOR = "cloud.google.com/gke-tpu-accelerator"
TPU_TOPOLOGY = "cloud.google.com/gke-tpu-topology"


def classify_neuron(
    name: str, labels: Mapping[str, str], owners: Iterable[str], images: Iterable[str]
) -> tuple[str, str] | None:
    images = tuple(images)
    if (
        name.startswith("neuron-device-plugin")
        or labels.get("name") == "neuron-device-plugin-ds"
        or labels.get("app.kubernetes.io/name") == "neuron-device-plugin"
        or any("neuron/neuron-device-plugin" in i for i in images)
    ):
        return NEURON_STACK, "device-plugin"
    if name.startswith(("neuron-monitor", "k8s-neuron-scheduler")):
        return NEURON_STACK, "other"
    return None


def classify_tpu(
    name: str, labels: Mapping[str, str], owners: Iterable[str], images: Iterable[str]
) -> tuple[str, str] | None:
    if (
        labels.get("k8s-app") == "tpu-device-plugin"
        or name.startswith("tpu-device-plugin")
        or any("/tpu-device-plugin@" in i or "/tpu-device-plugin:" in i for i in images)
    ):
        return TPU_STACK, "device-plugin"
    return None


NEURON = Vendor(
    key="aws-neuron",
    name="AWS Neuron",
    device_word="device",
    resource_prefix="aws.amazon.com/neuron",
    device_resource="aws.amazon.com/neuroncore",
    partition_prefix=None,
    feature_prefix="aws.amazon.com/neuron",
    product_label="node.kubernetes.io/instance-type",
    count_label="",
    memory_label="",
    node_signs=(("karpenter.k8s.aws/instance-accelerator-manufacturer", "aws"),),
    instance_prefixes=("inf1.", "inf2.", "trn1.", "trn1n.", "trn2.", "trn2u."),
    runtime_errors=re.compile(
        r"nrt_init|no neuron devices|/dev/neuron|oci_neuron_hook|Failed to discover neuron",
        re.IGNORECASE,
    ),
    classify=classify_neuron,
    titles={"device-plugin": "Neuron device plugin", "driver": "Neuron driver"},
    stack_titles={NEURON_STACK: "AWS Neuron device plugin"},
)

TPU = Vendor(
    key="google-tpu",
    name="Google TPU",
    device_word="chip",
    resource_prefix="google.com/tpu",
    device_resource="google.com/tpu",
    partition_prefix=None,
    feature_prefix="cloud.google.com/gke-tpu-",
    product_label=TPU_ACCELERATOR,
    count_label="",
    memory_label="",
    node_sign_keys=(TPU_ACCELERATOR, TPU_TOPOLOGY),
    instance_prefixes=("ct4p-", "ct5lp-", "ct5l-", "ct5p-", "ct6e-", "tpu7x-"),
    runtime_errors=re.compile(
        r"TPU initialization failed|Failed to get global TPU topology|/dev/accel|/dev/vfio",
        re.IGNORECASE,
    ),
    classify=classify_tpu,
    titles={"device-plugin": "TPU device plugin"},
    stack_titles={TPU_STACK: "GKE-managed TPU device plugin"},
)
