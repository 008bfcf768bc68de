"""What the engine must know of an accelerator vendor, declared in one place per vendor.

Everything that names a vendor's devices, labels and components sits behind this descriptor:
the extended resources its device plugin advertises (and their partitions, such as MIG
slices), the labels its feature discovery writes on a node, what else says a node carries its
devices (PCI vendor labels, a cloud's accelerator labels, instance types), its runtime class
and the errors its container runtime prints, how its components (driver, toolkit, device
plugin, ...) are recognised from their DaemonSets and pods, and how reports name them. The
engine asks a descriptor (`is_resource`, `component`, `title`); it never spells a vendor's
names itself. A vendor is one module that builds a `Vendor`, and a line in
`triage.vendors.VENDORS`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field


@dataclass(frozen=True)
class DriverUpgrade:
    """How a vendor's operator marks a node whose driver it is upgrading: the node label that
    holds the upgrade state, the annotations that stamp when a state began (Unix seconds),
    and where the upgrade policy that drives it lives (for reports)."""

    state_label: str
    since: Mapping[str, str]  # state -> the annotation holding when it began
    policy: str  # "ClusterPolicy spec.driver.upgradePolicy"
    policy_kind: str = ""  # the kind of the object holding the policy: "ClusterPolicy"
    wait_selector: tuple[str, ...] = ()  # path in the policy object to the waited pods' selector


# (stack, role) of a component, from its name, labels, owners' kinds and images; None when it
# is none of the vendor's
Classify = Callable[
    [str, Mapping[str, str], Iterable[str], Iterable[str]], "tuple[str, str] | None"
]


@dataclass(frozen=True)
class Vendor:
    key: str  # what playbooks name it by: "nvidia" (their `vendors:` section)
    name: str  # how reports name the vendor's parts: "NVIDIA driver"
    resource_prefix: str  # every extended resource of its devices starts so: "nvidia.com/"
    device_resource: str  # one whole device: "nvidia.com/gpu"
    partition_prefix: str | None  # a slice of one device ("nvidia.com/mig-"), if it has any
    feature_prefix: str  # the labels its feature discovery writes start so
    product_label: str  # the device's model, as feature discovery writes it
    count_label: str  # how many devices the node has, as feature discovery counts them
    memory_label: str  # each device's memory in MiB
    # (label, value) pairs and label keys that say a node carries its devices, before any of
    # its components ran there (PCI vendor, a cloud's accelerator labels)
    node_signs: tuple[tuple[str, str], ...] = ()
    node_sign_keys: tuple[str, ...] = ()
    instance_prefixes: tuple[str, ...] = ()  # cloud instance types built with its devices
    dra_drivers: tuple[str, ...] = ()  # the DRA drivers that publish its devices
    runtime_class: str = ""  # the RuntimeClass its container runtime is selected by
    runtime_errors: re.Pattern[str] = re.compile(r"(?!)")  # what its runtime prints failing
    classify: Classify = lambda *_: None
    titles: Mapping[str, str] = field(default_factory=dict)  # role -> "NVIDIA driver"
    stack_titles: Mapping[str, str] = field(default_factory=dict)  # stack -> its name
    device_word: str = "GPU"  # what one of its devices is, after its name: "GPU", "chip"
    driver_upgrade: DriverUpgrade | None = None  # its operator's rolling driver upgrade
    # what its container runtime prints for each known cause of a container that cannot
    # start, most specific first: (cause, pattern); causes are "cdi", "version-mismatch",
    # "runtime-init" (see triage.layers.runtime)
    runtime_causes: tuple[tuple[str, re.Pattern[str]], ...] = ()
    # how a node's runtime is told to inject its devices: RuntimeClass name -> mode
    runtime_modes: Mapping[str, str] = field(default_factory=dict)

    @property
    def devices(self) -> str:
        """Its devices, as reports say them: "AMD GPUs", "AWS Neuron devices"."""
        return f"{self.name} {self.device_word}s"

    def is_resource(self, resource: str) -> bool:
        """Whether `resource` is one of the vendor's devices (whole, shared or partitioned)."""
        return resource.startswith(self.resource_prefix)

    def is_partition(self, resource: str) -> bool:
        return self.partition_prefix is not None and resource.startswith(self.partition_prefix)

    def title(self, role: str) -> str:
        """How reports name one of its components: "NVIDIA driver", "device plugin"."""
        return self.titles.get(role, role)
