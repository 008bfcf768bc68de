"""The accelerator the pod asks for at all: a pod asking for GPUs can never use a node that
has none (kube-scheduler's NodeResourcesFit reports it as "Insufficient"; here it is told
apart from a node that is only full)."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from triage.cluster.objects import Obj
from triage.layers.node import NodeHealth
from triage.layers.scheduling.framework import Exclusion, FilterPlugin, Phase
from triage.vendors import NVIDIA, VENDORS, Vendor, vendor_of

NO_GPU = "no GPU"
# what the nodes without the devices a pod asks are counted as: "no GPU" for NVIDIA's (as
# the scheduler's "Insufficient nvidia.com/gpu" is read), "no AMD GPUs" for another vendor's
CATEGORY = {v.key: NO_GPU if v is NVIDIA else f"no {v.devices}" for v in VENDORS}


def exclude(
    pod: Obj, node: Obj, health: NodeHealth, requests: Mapping[str, int], gpu: bool
) -> Exclusion | None:
    # GPUs asked as extended resources: a node without GPUs has none of them. Devices asked
    # through DRA claims are the ResourceSlices' to place (the DynamicResources filter).
    for res in requests:
        vendor = vendor_of(res)
        if vendor is not None and vendor.key not in health.vendors:
            # a node without this vendor's devices (none, or another vendor's)
            return Exclusion(CATEGORY[vendor.key], _lacks(health.name, vendor))
    return None


def _lacks(name: str, vendor: Vendor) -> Callable[[], str]:
    return lambda: f"node {name} has no {vendor.name} {vendor.device_word}"


PLUGIN = FilterPlugin(
    name="NodeResourcesFit",
    phase=Phase.BEFORE_FIT,
    category="insufficient",
    pod_fields=("spec.containers[].resources", "spec.resourceClaims"),
    exclude=exclude,
    exclusion_codes={c: "scheduling.no-gpu-nodes" for c in CATEGORY.values()},
)
