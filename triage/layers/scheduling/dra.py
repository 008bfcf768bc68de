"""Dynamic Resource Allocation (resource.k8s.io): GPUs claimed through ResourceClaims.

A claim is unallocated for one of a few reasons, each at its layer: no DeviceClass or no
ResourceSlice from the DRA driver (the DRA kubelet plugin is not running: the device-plugin
layer's equivalent), no published device matches the claim's selectors, or every matching
device is allocated to other claims (scheduling). Selectors are CEL; the common forms
(driver, attribute and capacity comparisons) are evaluated here, anything else is reported
as not evaluated and assumed to match.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from triage.cluster.objects import Obj, meta, name_of, ns_of, pod_problem
from triage.cluster.quantities import amount
from triage.layers.base import Context
from triage.layers.scheduling.framework import FilterPlugin, Phase
from triage.layers.stacks.view import StackView
from triage.model import Layer
from triage.signals import Signal
from triage.vendors import NVIDIA

_DRIVER_EQ = re.compile(r'device\.driver\s*==\s*["\']([^"\']+)["\']')
_ATTR_CMP = re.compile(
    r'^device\.attributes\[["\']([^"\']+)["\']\]\.(\w+)\s*(==|!=)\s*(".*?"|\'.*?\'|true|false|-?\d+)$'
)
_CAP_CMP = re.compile(
    r'^device\.capacity\[["\']([^"\']+)["\']\]\.(\w+)\.compareTo\(quantity\(["\']([^"\']+)["\']\)\)\s*(>=|>|<=|<|==)\s*0$'
)


@dataclass
class Request:
    claim: str
    name: str
    device_class: str
    count: int | None  # None: allocationMode All
    selectors: list[str] = field(default_factory=list)


@dataclass
class Device:
    driver: str
    pool: str
    name: str
    node: str | None
    attributes: dict[str, Any]
    capacity: dict[str, Any]


def requests_of(claim: Obj) -> list[Request]:
    out = []
    devices = (claim.get("spec") or {}).get("devices") or {}
    for r in devices.get("requests") or []:
        body = r.get("exactly") or r  # v1 nests under `exactly`; v1beta1 does not
        if not body.get("deviceClassName") and r.get("firstAvailable"):
            body = r["firstAvailable"][0]
        mode = body.get("allocationMode", "ExactCount")
        out.append(
            Request(
                claim=name_of(claim),
                name=str(r.get("name", "")),
                device_class=str(body.get("deviceClassName", "")),
                count=None if mode == "All" else int(body.get("count") or 1),
                selectors=[
                    str((s.get("cel") or {}).get("expression", ""))
                    for s in body.get("selectors") or []
                ],
            )
        )
    return out


def devices_of(slices: list[Obj]) -> list[Device]:
    out = []
    for s in slices:
        spec = s.get("spec") or {}
        for d in spec.get("devices") or []:
            body = d.get("basic") or d  # v1beta1 wraps attributes under `basic`
            out.append(
                Device(
                    driver=str(spec.get("driver", "")),
                    pool=str((spec.get("pool") or {}).get("name", "")),
                    name=str(d.get("name", "")),
                    node=spec.get("nodeName"),
                    attributes=body.get("attributes") or {},
                    capacity=body.get("capacity") or {},
                )
            )
    return out


def _attr(device: Device, domain: str, name: str) -> Any:
    keys = [f"{domain}/{name}"] + ([name] if domain == device.driver else [])
    for k in keys:
        if k in device.attributes:
            v = device.attributes[k]
            return next(iter(v.values())) if isinstance(v, dict) and v else v
    return None


def selector_matches(expr: str, device: Device) -> bool | None:
    """Evaluate a CEL selector's common forms; None when the expression is not understood."""
    result = True
    for atom in (a.strip().strip("()").strip() for a in expr.split("&&")):
        m = _DRIVER_EQ.fullmatch(atom)
        if m:
            result &= device.driver == m.group(1)
            continue
        m = _ATTR_CMP.match(atom)
        if m:
            have = _attr(device, m.group(1), m.group(2))
            raw = m.group(4)
            want: Any = (
                raw[1:-1]
                if raw[0] in "\"'"
                else raw == "true"
                if raw in ("true", "false")
                else int(raw)
            )
            result &= (have == want) if m.group(3) == "==" else (have != want)
            continue
        m = _CAP_CMP.match(atom)
        if m:
            cap = device.capacity.get(f"{m.group(1)}/{m.group(2)}") or device.capacity.get(
                m.group(2)
            )
            value = cap.get("value") if isinstance(cap, dict) else cap
            if value is None:
                return False
            a, b = amount("memory", value), amount("memory", m.group(3))
            result &= {">=": a >= b, ">": a > b, "<=": a <= b, "<": a < b, "==": a == b}[m.group(4)]
            continue
        return None
    return result


@dataclass
class DraView:
    classes: dict[str, Obj]
    devices: list[Device]
    claims: list[Obj]  # every claim in the cluster, for what is already allocated
    plugin_pods: dict[str, list[Obj]] = field(default_factory=dict)  # DRA kubelet plugin, by node

    def nodes_with_devices(self, requests: list[Request]) -> set[str] | None:
        """Nodes publishing devices of the requested classes' drivers; None when any such
        device is not node-local (or no driver publishes anything: then no node is excluded)."""
        drivers = {self.class_driver(r.device_class) for r in requests}
        mine = [d for d in self.devices if None in drivers or d.driver in drivers]
        if not mine or any(d.node is None for d in mine):
            return None
        return {d.node for d in mine if d.node}

    @property
    def allocated(self) -> dict[tuple[str, str, str], str]:
        out = {}
        for c in self.claims:
            results = (((c.get("status") or {}).get("allocation") or {}).get("devices") or {}).get(
                "results"
            ) or []
            for r in results:
                out[(str(r.get("driver")), str(r.get("pool")), str(r.get("device")))] = name_of(c)
        return out

    def class_driver(self, device_class: str) -> str | None:
        dc = self.classes.get(device_class)
        for s in ((dc or {}).get("spec") or {}).get("selectors") or []:
            m = _DRIVER_EQ.search(str((s.get("cel") or {}).get("expression", "")))
            if m:
                return m.group(1)
        return None

    def matching(self, req: Request) -> tuple[list[Device], bool]:
        """Devices matching the request's class and selectors, and whether all CEL was understood."""
        dc = self.classes.get(req.device_class) or {}
        exprs = [
            str((s.get("cel") or {}).get("expression", ""))
            for s in (dc.get("spec") or {}).get("selectors") or []
        ]
        exprs += req.selectors
        understood = True
        out = []
        for d in self.devices:
            ok = True
            for e in exprs:
                verdict = selector_matches(e, d)
                if verdict is None:
                    understood = False
                elif not verdict:
                    ok = False
                    break
            if ok:
                out.append(d)
        return out, understood


def pod_claims(pod: Obj, claims: list[Obj]) -> list[tuple[str, Obj | None, str]]:
    """(claim reference, the ResourceClaim if it exists, how the pod names it)."""
    by_name = {name_of(c): c for c in claims}
    generated = {
        s.get("name"): s.get("resourceClaimName")
        for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
    }
    out = []
    for ref in (pod.get("spec") or {}).get("resourceClaims") or []:
        if ref.get("resourceClaimName"):
            name = str(ref["resourceClaimName"])
            out.append((name, by_name.get(name), f"ResourceClaim {name}"))
        else:
            tpl = ref.get("resourceClaimTemplateName", "?")
            name = generated.get(ref.get("name")) or ""
            out.append(
                (
                    name or f"<from template {tpl}>",
                    by_name.get(name),
                    f"ResourceClaimTemplate {tpl}",
                )
            )
    return out


def reserved_for_others(claim: Obj, pod: Obj) -> list[str]:
    uid = meta(pod).get("uid")
    return [
        str(r.get("name"))
        for r in (claim.get("status") or {}).get("reservedFor") or []
        if r.get("resource") == "pods"
        and r.get("name") != name_of(pod)
        and (uid is None or r.get("uid") != uid)
    ]


NO_DRA = "no DRA devices"  # the exclusion of nodes publishing nothing the pod's claims match

LAYER_OF = {
    "device-plugin.dra-deviceclass-missing": Layer.DEVICE_PLUGIN,
    "device-plugin.dra-no-slices": Layer.DEVICE_PLUGIN,
    "scheduling.dra-no-matching-device": Layer.SCHEDULING,
    "scheduling.dra-devices-allocated": Layer.SCHEDULING,
}


def node_block(
    node: str, requests: list[Request], view: DraView, allocated: dict[tuple[str, str, str], str]
) -> tuple[Layer, str, str] | None:
    """Why the node cannot satisfy the pod's unallocated claims, at the lowest layer."""
    for req in requests:
        what = f"claim {req.claim} request {req.name or '?'}"
        if req.device_class not in view.classes:
            return (
                Layer.DEVICE_PLUGIN,
                "device-plugin.dra-deviceclass-missing",
                f"DeviceClass {req.device_class} (for {what}) does not exist: is the {NVIDIA.name} DRA driver installed?",
            )
        driver = view.class_driver(req.device_class)
        local = [
            d
            for d in view.devices
            if d.node in (node, None) and (driver is None or d.driver == driver)
        ]
        if not local:
            plugin = ", ".join(
                f"{ns_of(p)}/{name_of(p)} {pod_problem(p, messages=False) or 'running'}"
                for p in view.plugin_pods.get(node, [])
            )
            return (
                Layer.DEVICE_PLUGIN,
                "device-plugin.dra-no-slices",
                f"node {node}: no ResourceSlice published by {driver or 'the DRA driver'} "
                + (
                    f"(DRA kubelet plugin pod {plugin})"
                    if plugin
                    else "(no DRA kubelet plugin pod runs there)"
                ),
            )
        matching, understood = view.matching(req)
        here = [d for d in matching if d.node in (node, None)]
        if not here:
            sel = f", selectors {' && '.join(req.selectors)}" if req.selectors else ""
            return (
                Layer.SCHEDULING,
                "scheduling.dra-no-matching-device",
                f"node {node}: none of its {len(local)} device(s) match {what} (DeviceClass {req.device_class}{sel})",
            )
        free = [d for d in here if (d.driver, d.pool, d.name) not in allocated]
        need = len(here) if req.count is None else req.count
        if len(free) < need:
            holders = sorted(
                {
                    allocated[(d.driver, d.pool, d.name)]
                    for d in here
                    if (d.driver, d.pool, d.name) in allocated
                }
            )
            return (
                Layer.SCHEDULING,
                "scheduling.dra-devices-allocated",
                f"node {node}: {len(here) - len(free)}/{len(here)} matching device(s) allocated "
                f"(claims {', '.join(holders[:4])}), {what} needs {need}"
                + ("" if understood else " [some CEL selectors not evaluated]"),
            )
    return None


DraCheck = Callable[[str], "tuple[Layer, str, str] | None"]


@dataclass
class ClaimCheck:
    """The pod's ResourceClaims, judged: signals about the claims themselves, and for the
    unallocated ones a per-node check (`node`) and the nodes publishing devices for them
    (`nodes`; None: no restriction)."""

    signals: list[Signal] = field(default_factory=list)
    node: DraCheck | None = None
    nodes: set[str] | None = None


def check_claims(ctx: Context, pod: Obj, stacks: StackView) -> ClaimCheck:
    out = ClaimCheck()
    if not (pod.get("spec") or {}).get("resourceClaims"):
        return out
    # Every read or none: a claim judged on a list that could not be read would "not exist",
    # and a device class or slice missing from it would leave "no device" on every node.
    both = (Layer.DEVICE_PLUGIN, Layer.SCHEDULING)
    claims_here = ctx.try_read("ResourceClaim", ctx.target.namespace, layers=both)
    classes = ctx.try_read("DeviceClass", None, layers=both)
    slices = ctx.try_read("ResourceSlice", None, layers=both)
    claims_all = ctx.try_read("ResourceClaim", None, layers=both)
    if claims_here is None or classes is None or slices is None or claims_all is None:
        return out
    view = DraView(
        classes={name_of(c): c for c in classes},
        devices=devices_of(slices),
        claims=claims_all,
    )
    for node, roles in stacks.pods_by_node.items():
        if "dra-plugin" in roles:
            view.plugin_pods[node] = roles["dra-plugin"]
    requests = []
    for ref, claim, how in pod_claims(pod, claims_here):
        if claim is None:
            out.signals.append(
                Signal(
                    Layer.SCHEDULING,
                    "scheduling.dra-claim-missing",
                    f"the pod's ResourceClaim {ref} ({how}) does not exist yet",
                    evidence=[f"pod spec.resourceClaims names {how}"],
                )
            )
        elif (claim.get("status") or {}).get("allocation"):
            out.signals.extend(_allocated(ref, claim, pod))
        else:
            requests.extend(requests_of(claim))
    if requests:
        allocated = view.allocated
        out.node = lambda node: node_block(node, requests, view, allocated)
        out.nodes = view.nodes_with_devices(requests)
    return out


def _allocated(ref: str, claim: Obj, pod: Obj) -> list[Signal]:
    """An allocated claim holds the pod back only when it is reserved for other pods."""
    others = reserved_for_others(claim, pod)
    if not others:
        return []
    results = (((claim["status"]["allocation"]).get("devices") or {}).get("results")) or []
    devs = ", ".join(f"{r.get('pool')}/{r.get('device')}" for r in results)
    return [
        Signal(
            Layer.SCHEDULING,
            "scheduling.dra-claim-in-use",
            f"ResourceClaim {ref} is allocated and reserved for pod(s) {', '.join(others)}",
            evidence=[f"ResourceClaim {ref} is allocated ({devs or 'no devices listed'})"],
        )
    ]


PLUGIN = FilterPlugin(
    name="DynamicResources",
    phase=Phase.BEFORE_FIT,
    category="resource claims",
    reasons={
        "device-plugin.dra-deviceclass-missing": "the DeviceClass the pod's ResourceClaim "
        "asks for does not exist",
        "device-plugin.dra-no-slices": "{n} of {c} node(s) the pod can use publish no "
        "ResourceSlice (DRA kubelet plugin not running)",
        "scheduling.dra-no-matching-device": "no device on the {n} node(s) the pod can use "
        "matches its ResourceClaim",
        "scheduling.dra-devices-allocated": "{n} of {c} node(s) the pod can use have every "
        "matching DRA device allocated to other claims",
        "scheduling.dra-claim-missing": "",
        "scheduling.dra-claim-in-use": "",
    },
    scheduler_says=("cannot allocate all claims", "DynamicResources", "resourceclaim"),
    pod_fields=("spec.resourceClaims", "spec.containers[].resources.claims"),
    applies=lambda pod: bool((pod.get("spec") or {}).get("resourceClaims")),
    # The claims are judged here, but kube-scheduler's own words about them are not read as
    # modelled (its message for them stays evidence of what it still refuses).
    modelled=False,
    exclusion_codes={NO_DRA: "scheduling.dra-no-matching-device"},
)  # fmt: skip
