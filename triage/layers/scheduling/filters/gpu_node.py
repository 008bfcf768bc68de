"""The accelerator the pod asks for at all: a pod asking for GPUs can never use a node that
has none (kube-scheduler's NodeResourcesFit reports it as "Insufficient"; here it is told
apart from a node that is only full)."""

from __future__ import annotations

from collections.abc import Mapping

from triage.cluster.objects import Obj
from triage.layers.node import NodeHealth
from triage.layers.scheduling.framework import Exclusion, FilterPlugin, Phase
from triage.vendors import NVIDIA

NO_GPU = "no GPU"


def exclude(
    pod: Obj, node: Obj, health: NodeHealth, requests: Mapping[str, int], gpu: bool
) -> Exclusion | None:
    if gpu and not health.gpu_node:
        return Exclusion(NO_GPU, lambda: f"node {health.name} has no {NVIDIA.name} GPU")
    return None


PLUGIN = FilterPlugin(
    name="NodeResourcesFit",
    phase=Phase.BEFORE_FIT,
    category="insufficient",
    pod_fields=("spec.containers[].resources", "spec.resourceClaims"),
    exclude=exclude,
    exclusion_codes={NO_GPU: "scheduling.no-gpu-nodes"},
)
