"""Accelerator vendors: one module per vendor or family (`nvidia`, `amd`, `intel`, `cloud`),
each building `Vendor` descriptors (`base`), listed in `VENDORS`. The engine asks these
functions, never a vendor's names.

May import: `triage.cluster.objects` and nothing else of the engine.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import lru_cache

from triage.vendors.amd import AMD
from triage.vendors.base import Vendor
from triage.vendors.cloud import NEURON, TPU
from triage.vendors.intel import GAUDI, INTEL_GPU
from triage.vendors.nvidia import NVIDIA

VENDORS: tuple[Vendor, ...] = (NVIDIA, AMD, GAUDI, INTEL_GPU, NEURON, TPU)
# Every vendor's stacks, by the name `component` gives them: what reports call each.
STACK_TITLES: dict[str, str] = {k: v for vendor in VENDORS for k, v in vendor.stack_titles.items()}


@lru_cache(maxsize=1024)
def vendor_of(resource: str) -> Vendor | None:
    """The vendor whose device `resource` is, or None for any other resource (a cluster names
    a few dozen resources: each is looked up once)."""
    return next((v for v in VENDORS if v.is_resource(resource)), None)


def is_accelerator(resource: str) -> bool:
    """Whether `resource` is an accelerator of a vendor the engine knows."""
    return vendor_of(resource) is not None


def accelerator_requests(requests: Mapping[str, int]) -> dict[str, int]:
    """The accelerator resources among `requests`."""
    return {r: v for r, v in requests.items() if is_accelerator(r)}


def node_vendors(node: Mapping[str, object]) -> tuple[str, ...]:
    """The keys of every vendor whose accelerators the node carries (most nodes: one)."""
    meta = node.get("metadata") or {}
    status = node.get("status") or {}
    labels = meta.get("labels") or {} if isinstance(meta, Mapping) else {}
    capacity = status.get("capacity") or {} if isinstance(status, Mapping) else {}
    return tuple(v.key for v in VENDORS if v.on_node(labels, capacity))


def node_vendor(node: Mapping[str, object]) -> Vendor | None:
    """The vendor whose accelerators the node carries (the first, on the rare node with
    two), or None for a node with none."""
    meta = node.get("metadata") or {}
    status = node.get("status") or {}
    labels = meta.get("labels") or {} if isinstance(meta, Mapping) else {}
    capacity = status.get("capacity") or {} if isinstance(status, Mapping) else {}
    return next((v for v in VENDORS if v.on_node(labels, capacity)), None)


def component(
    name: str, labels: Mapping[str, str], owners: Iterable[str] = (), images: Iterable[str] = ()
) -> tuple[str, str] | None:
    """(stack, role) of a DaemonSet or pod that is an accelerator component of some vendor."""
    owners, images = tuple(owners), tuple(images)
    return next(
        (found for v in VENDORS if (found := v.classify(name, labels, owners, images))), None
    )


__all__ = ["NVIDIA", "STACK_TITLES", "VENDORS", "Vendor", "accelerator_requests", "component", "is_accelerator",
           "node_vendor", "node_vendors", "vendor_of"]  # fmt: skip
