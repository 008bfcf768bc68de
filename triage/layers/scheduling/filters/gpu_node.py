"""The accelerator the pod asks for at all: a pod asking for GPUs can never use a node that
has none (kube-scheduler's NodeResourcesFit reports it as "Insufficient"; here it is told
apart from a node that is only full)."""

from __future__ import annotations

from collections.abc import Mapping

from triage.cluster.objects import Obj
from triage.layers.node import NodeHealth
from triage.layers.scheduling.framework import Exclusion, FilterPlugin, Phase
from triage.vendors import NVIDIA, is_accelerator, vendor_of

NO_GPU = "no GPU"


def exclude(
    pod: Obj, node: Obj, health: NodeHealth, requests: Mapping[str, int], gpu: bool
) -> Exclusion | None:
    # GPUs asked as extended resources: a node without GPUs has none of them. Devices asked
    # through DRA claims are the ResourceSlices' to place (the DynamicResources filter).
    wanted = [r for r in requests if is_accelerator(r)]
    if wanted and not health.gpu_node:
        vendor = vendor_of(wanted[0]) or NVIDIA
        return Exclusion(
            NO_GPU, lambda: f"node {health.name} has no {vendor.name} {vendor.device_word}"
        )
    return None


PLUGIN = FilterPlugin(
    name="NodeResourcesFit",
    phase=Phase.BEFORE_FIT,
    category="insufficient",
    pod_fields=("spec.containers[].resources", "spec.resourceClaims"),
    exclude=exclude,
    exclusion_codes={NO_GPU: "scheduling.no-gpu-nodes"},
)
