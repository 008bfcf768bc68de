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


def node_vendor(node: Mapping[str, object]) -> Vendor | None:
    """The vendor whose accelerators the node carries (the first, on the rare node with
    two), or None for a node with none."""
    found = vendors_on(node)
    return found[0] if found else None


def vendors_on(node: Mapping[str, object]) -> tuple[Vendor, ...]:
    """Every vendor whose accelerators the node carries, in `VENDORS` order: its capacity
    lists one of the vendor's resources, or its labels carry one of the vendor's signs (its
    feature discovery's, PCI vendor's or a cloud's labels), or its instance type is built
    with the vendor's devices. One pass for all vendors: every node is asked, several times
    a triage."""
    meta = node.get("metadata") or {}
    status = node.get("status") or {}
    labels = meta.get("labels") or {} if isinstance(meta, Mapping) else {}
    capacity = status.get("capacity") or {} if isinstance(status, Mapping) else {}
    found = {_INDEX.get(id(vendor_of(k))) for k in capacity}
    for key in labels.keys() & _SIGN_LABELS:  # the few sign labels the node has
        value = labels[key]
        found.update(i for wanted, i in _LOOKED_AT[key] if wanted is _ANY or wanted == value)
    itype = labels.get("node.kubernetes.io/instance-type") or ""
    if itype:
        found.update(i for prefixes, i in _INSTANCES if itype.startswith(prefixes))
    return tuple(v for i, v in enumerate(VENDORS) if i in found)


# What `vendors_on` looks for: per label, the value that is a vendor's sign (_ANY: the label
# itself is) with the vendor's position in VENDORS; instance type prefixes likewise.
_INDEX = {id(v): i for i, v in enumerate(VENDORS)}
_ANY = object()
_LOOKED_AT: dict[str, list[tuple[object, int]]] = {}
for _i, _v in enumerate(VENDORS):
    for _key, _value in _v.node_signs:
        _LOOKED_AT.setdefault(_key, []).append((_value, _i))
    for _key in _v.node_sign_keys:
        _LOOKED_AT.setdefault(_key, []).append((_ANY, _i))
_SIGN_LABELS = frozenset(_LOOKED_AT)
_INSTANCES = tuple((v.instance_prefixes, i) for i, v in enumerate(VENDORS) if v.instance_prefixes)


def component(
    name: str, labels: Mapping[str, str], owners: Iterable[str] = (), images: Iterable[str] = ()
) -> tuple[str, str] | None:
    """(stack, role) of a DaemonSet or pod that is an accelerator component of some vendor."""
    owners, images = tuple(owners), tuple(images)
    return next(
        (found for v in VENDORS if (found := v.classify(name, labels, owners, images))), None
    )


__all__ = ["NVIDIA", "STACK_TITLES", "VENDORS", "Vendor", "accelerator_requests", "component", "is_accelerator",
           "node_vendor", "vendor_of", "vendors_on"]  # fmt: skip
