"""What stops the pod *now* on a node it could use, at the lowest layer: the node down or its
driver broken, GPU labels missing because feature discovery is down, the device plugin not
offering the resource (unhealthy devices, MIG layout, sharing renames), a ResourceClaim that
cannot be met, a cordon, or too few free resources."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

from triage.cluster.objects import Obj
from triage.cluster.quantities import GPU, MIG_PREFIX
from triage.cluster.usage import NodeUsage
from triage.layers.node import NodeHealth
from triage.layers.node_verdict import NodeVerdict
from triage.layers.scheduling.dra import DraCheck
from triage.layers.scheduling.filters.resources_fit import INSUFFICIENT, shortfall_text
from triage.layers.scheduling.filters.unschedulable import CORDONED, cordoned
from triage.layers.scheduling.filters.view import Refusal
from triage.model import Layer
from triage.vendors import is_accelerator


class NodeFit:
    """What blocks the pod, now, on one node it could use. Made only for nodes off the fast
    path (broken, cordoned, joining) and for those a report describes; attributes default at
    class level."""

    layer: Layer | None = None  # lowest layer blocking the pod here now; None = usable
    code: str = ""
    text: str = ""
    detail: list[str] | tuple[str, ...] = ()
    gfd_labels_missing: bool = False
    pod: str = ""  # "namespace/name" of the GPU component pod at fault, if one is
    values: Mapping[str, str] = MappingProxyType({})  # playbook placeholders it fills
    joining: str | None = None  # set when the node will likely be usable within minutes
    lazy: Callable[[], tuple[str, list[str]]] | None = None

    def __init__(self, node: str) -> None:
        self.node = node

    def __repr__(self) -> str:
        return f"NodeFit({self.node!r}, layer={self.layer}, code={self.code!r})"

    def describe(self) -> tuple[str, list[str] | tuple[str, ...]]:
        """(text, operator-only detail) of what blocks the pod here, built on first use."""
        if self.lazy is not None:
            self.text, self.detail = self.lazy()
            self.lazy = None
        return self.text, self.detail


def dynamic(
    fit: NodeFit,
    *,
    node: Obj,
    health: NodeHealth,
    requests: Mapping[str, int],
    usage: NodeUsage | None,
    dra: DraCheck | None,
    gpu: bool,
) -> NodeFit:
    """What stops the pod on a node it could use, now, at the lowest layer: everything but
    its free resources (`_Class.short`)."""
    name = health.name
    if gpu and health.joining:
        fit.joining = health.joining
        return fit
    if not health.driver.ok and (gpu or health.driver.code == "driver.node-not-ready"):
        _blocked_by(fit, Layer.DRIVER, health.driver)
        return fit
    if gpu and fit.gfd_labels_missing and health.gfd_down:
        fit.layer, fit.code = Layer.DEVICE_PLUGIN, "device-plugin.gfd-down"
        fit.text = f"node {name} lacks the GPU labels the pod selects: {health.gfd_down}"
        return fit
    if gpu:
        plugin = _plugin_block(health, requests, usage)
        if plugin is not None:
            _blocked_by(fit, *plugin)
            return fit
    if dra is not None:
        claim_block = dra(name)
        if claim_block is not None:
            fit.layer, fit.code, fit.text = claim_block
            return fit
    if cordoned(node):
        fit.layer, fit.code, fit.text = Layer.SCHEDULING, CORDONED, f"node {name} is cordoned"
    return fit


def refused(node: str, refusal: Refusal) -> NodeFit:
    fit = NodeFit(node)
    fit.layer, fit.code, fit.text = Layer.SCHEDULING, refusal.code, refusal.text
    fit.detail, fit.values = refusal.detail, refusal.values
    return fit


def _blocked_by(fit: NodeFit, layer: Layer, verdict: NodeVerdict) -> None:
    fit.layer, fit.code, fit.text = layer, verdict.code, verdict.text
    fit.detail, fit.pod, fit.values = list(verdict.detail), verdict.pod, verdict.values


def insufficient(
    fit: NodeFit, health: NodeHealth, requests: Mapping[str, int], usage: NodeUsage | None
) -> None:
    fit.layer, fit.code = Layer.SCHEDULING, INSUFFICIENT
    fit.lazy = lambda: shortfall_text(health.name, health.allocatable_all, requests, usage)


def _plugin_block(
    health: NodeHealth, requests: Mapping[str, int], usage: NodeUsage | None
) -> tuple[Layer, NodeVerdict] | None:
    """What stops the pod's accelerator requests on the node, below scheduling: the device plugin
    (or, for a failed MIG reconfiguration, the operator's MIG manager, routed as the driver)."""
    used = usage.requests if usage else {}
    if health.plugin.code == "device-plugin.mig-reconfiguring":
        return Layer.DEVICE_PLUGIN, health.plugin
    name = health.name
    for res, want in requests.items():
        if not is_accelerator(res):
            continue
        alloc = health.allocatable.get(res, 0)
        if alloc > 0:
            cap = health.capacity.get(res, alloc)
            if cap == alloc or alloc - used.get(res, 0) >= want:
                continue  # the common case, kept cheap: it runs for every candidate node
            free = alloc - used.get(res, 0)
            if free < want <= cap - used.get(res, 0):
                return Layer.DEVICE_PLUGIN, NodeVerdict(
                    False,
                    "device-plugin.unhealthy-devices",
                    f"node {name}: {res} allocatable {alloc} < capacity {cap} "
                    f"({cap - alloc} unhealthy), {used.get(res, 0)} in use, pod needs {want}",
                )
            continue
        return _not_offered(health, res)
    # A failing plugin pod on a node that still advertises its GPUs is a side note here.
    return None


def _not_offered(health: NodeHealth, res: str) -> tuple[Layer, NodeVerdict]:
    """Why a node the pod could use offers none of the accelerator resource `res`."""
    name = health.name
    if health.mig_failed is not None:
        return Layer.DRIVER, health.mig_failed
    offered = {
        k: v for k, v in health.allocatable.items() if v > 0 and not k.startswith(MIG_PREFIX)
    }
    if offered and not res.startswith(MIG_PREFIX) and health.plugin.ok:
        names = ", ".join(f"{k}: {v}" for k, v in sorted(offered.items()))
        return Layer.DEVICE_PLUGIN, NodeVerdict(
            False,
            "device-plugin.resource-renamed",
            f"node {name} advertises {names} but not {res} (GPU sharing renames the resource)",
        )
    # The node offers none of the resource.
    if res == GPU and health.mig_resources:
        mig = ", ".join(f"{k}: {v}" for k, v in sorted(health.mig_resources.items()))
        return Layer.DEVICE_PLUGIN, NodeVerdict(
            False,
            "device-plugin.mig-only",
            f"node {name} exposes only MIG slices ({mig}), not {GPU}",
        )
    if not health.plugin.ok:
        return Layer.DEVICE_PLUGIN, health.plugin
    if res.startswith(MIG_PREFIX):
        layout = (
            ", ".join(f"{k}: {v}" for k, v in sorted(health.mig_resources.items()))
            or "no MIG slices"
        )
        return Layer.DEVICE_PLUGIN, NodeVerdict(
            False,
            "device-plugin.mig-profile-missing",
            f"node {name} is not partitioned into {res} (it offers {layout})",
        )
    return Layer.DEVICE_PLUGIN, NodeVerdict(
        False, "device-plugin.no-gpu-resource", f"node {name} advertises no {res}"
    )
