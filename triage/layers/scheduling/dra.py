"""Dynamic Resource Allocation (resource.k8s.io): GPUs claimed through ResourceClaims.

A claim is unallocated for one of a few reasons, each at its layer: no DeviceClass or no
ResourceSlice from the DRA driver (the DRA kubelet plugin is not running: the device-plugin
layer's equivalent), no published device matches the claim's selectors, or every matching
device is allocated to other claims (scheduling). What claims, classes and slices say, and
the CEL selectors evaluated, is `dra_devices`; this module judges the pod's claims.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from triage.cluster.objects import Obj, name_of, ns_of, pod_problem
from triage.cluster.selectors import node_selector_term_matches
from triage.layers.base import Context
from triage.layers.scheduling.dra_devices import (
    DraView,
    Request,
    devices_of,
    pod_claims,
    requests_of,
    reserved_for_others,
)
from triage.layers.scheduling.framework import FilterPlugin, Phase
from triage.layers.stacks.view import StackView
from triage.model import Layer
from triage.signals import Signal
from triage.vendors import VENDORS

NO_DRA = "no DRA devices"  # the exclusion of nodes publishing nothing the pod's claims match
NOT_EVALUATED = "a CEL selector is beyond what GPU Triage evaluates: taken as matching"

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
                f"DeviceClass {req.device_class} (for {what}) does not exist: is the DRA "
                "driver that provides it installed?",
            )
        driver = view.class_driver(req.device_class)
        published = view.of_driver(driver)
        local = view.on(node, published)
        shared = [d for d in view.shared if driver is None or d.driver == driver]
        if not local and shared and not view.plugin_pods.get(node):
            # the driver's devices are reachable from chosen nodes (network-attached, a
            # rack): this node is not one of them, which no plugin on it would change
            return (
                Layer.SCHEDULING,
                "scheduling.dra-no-matching-device",
                f"node {node}: none of the {len(shared)} device(s) {driver or 'the driver'} "
                "publishes for a set of nodes is reachable from it (ResourceSlice nodeSelector)",
            )
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
        here = view.on(node, matching)
        if not here:
            sel = f", selectors {' && '.join(req.selectors)}" if req.selectors else ""
            return (
                Layer.SCHEDULING,
                "scheduling.dra-no-matching-device",
                f"node {node}: none of its {len(local)} device(s) match {what} (DeviceClass {req.device_class}{sel})"
                + ("" if understood else f" [{NOT_EVALUATED}]"),
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
                + ("" if understood else f" [{NOT_EVALUATED}]"),
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
    context: list[str] = field(default_factory=list)  # evidence for what stops the pod
    vendor: str = ""  # the accelerator vendor whose DRA driver the claims ask, if known


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
        # parsed once while the slices are unchanged (a sweep asks for every DRA pod)
        devices=ctx.memo.get_lists(("dra-devices",), (slices,), lambda: devices_of(slices)),
        claims=claims_all,
        node_obj=lambda name: ctx.get("Node", name, None, layer=Layer.SCHEDULING),
    )
    for node, roles in stacks.pods_by_node.items():
        if "dra-plugin" in roles:
            view.plugin_pods[node] = roles["dra-plugin"]
    requests = []
    pinned: list[tuple[str, Obj]] = []  # allocated claims: (claim, the nodes its devices serve)
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
            selector = claim["status"]["allocation"].get("nodeSelector")
            if selector:
                pinned.append((ref, selector))
                where = _named_nodes(selector)
                others = reserved_for_others(claim, pod)
                shared = f", shared with pod(s) {', '.join(others[:3])}" if others else ""
                out.context.append(
                    f"ResourceClaim {ref} is already allocated{shared}: the pod can only run "
                    f"where its devices are ({', '.join(sorted(where)) if where else 'the nodes its allocation selects'})"
                )
        else:
            requests.extend(requests_of(claim))
    drivers = {view.class_driver(r.device_class) for r in requests}
    out.vendor = next((v.name for v in VENDORS if drivers & set(v.dra_drivers)), "")
    if requests or pinned:
        allocated = view.allocated

        def block(node: str) -> tuple[Layer, str, str] | None:
            return _pinned_block(node, pinned, view) or node_block(node, requests, view, allocated)

        out.node = block
        out.nodes = view.nodes_with_devices(requests) if requests else None
        if pinned:  # the pod can only go where its allocated devices are
            named = [_named_nodes(sel) for _, sel in pinned]
            if all(n is not None for n in named):
                where = set.intersection(*(n for n in named if n is not None))
                out.nodes = where if out.nodes is None else out.nodes & where
    return out


def _named_nodes(selector: Obj) -> set[str] | None:
    """The nodes a NodeSelector names outright (`metadata.name In [...]` in every term), or
    None when it selects by labels."""
    names: set[str] = set()
    for term in selector.get("nodeSelectorTerms") or []:
        fields = [f for f in term.get("matchFields") or [] if f.get("key") == "metadata.name"]
        if term.get("matchExpressions") or not fields or fields[0].get("operator") != "In":
            return None
        names |= set(fields[0].get("values") or [])
    return names


def _pinned_block(
    node: str, pinned: list[tuple[str, Obj]], view: DraView
) -> tuple[Layer, str, str] | None:
    """An allocated claim whose devices a pod on `node` cannot reach."""
    for ref, selector in pinned:
        obj = view.node_obj(node)
        terms = selector.get("nodeSelectorTerms") or []
        if obj is None or not any(node_selector_term_matches(t, obj) for t in terms):
            where = _named_nodes(selector)
            return (
                Layer.SCHEDULING,
                "scheduling.dra-claim-elsewhere",
                f"node {node}: ResourceClaim {ref} is already allocated to devices on "
                + (", ".join(sorted(where)) if where else "other nodes"),
            )
    return None


# A claim may be reserved for this many consumers at once (ResourceClaimStatus.reservedFor):
# pods on the claim's node share it until the list is full.
RESERVED_FOR_MAX = 256


def _allocated(ref: str, claim: Obj, pod: Obj) -> list[Signal]:
    """An allocated claim holds the pod back only when its consumers list is full: any other
    pod on its node may share it (its node is the pod's constraint, `_pinned_block`)."""
    others = reserved_for_others(claim, pod)
    if len(others) < RESERVED_FOR_MAX:
        return []
    results = (((claim["status"]["allocation"]).get("devices") or {}).get("results")) or []
    devs = ", ".join(f"{r.get('pool')}/{r.get('device')}" for r in results)
    return [
        Signal(
            Layer.SCHEDULING,
            "scheduling.dra-claim-in-use",
            f"ResourceClaim {ref} is shared by {len(others)} pods already, the most a claim "
            f"may be reserved for ({', '.join(others[:3])}, ...)",
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
        "scheduling.dra-claim-elsewhere": "the pod's ResourceClaim is allocated to devices "
        "on node(s) it cannot use now",
        "scheduling.dra-claim-missing": "",
        "scheduling.dra-claim-in-use": "",
    },
    scheduler_says=("cannot allocate all claims", "DynamicResources", "resourceclaim"),
    pod_fields=("spec.resourceClaims", "spec.containers[].resources.claims"),
    applies=lambda pod: bool((pod.get("spec") or {}).get("resourceClaims")),
    # The claims are judged here, but kube-scheduler's own words about them are not read as
    # modelled (its message for them stays evidence of what it still refuses).
    modelled=False,
    exclusion_codes={NO_DRA: "scheduling.dra-no-matching-device"},  # or allocated elsewhere
)  # fmt: skip
