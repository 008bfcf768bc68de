"""What DRA objects say, read as the scheduler reads them: a claim's requests, the devices
ResourceSlices publish and the nodes each serves (a node by name, nodes a selector picks, every
node; per slice or, with `perDeviceNodeSelection`, per device), which claims hold which
devices, and DeviceClass and request selectors (CEL, evaluated by `dra_cel`, which says when an
expression is beyond it). `resource.k8s.io/v1` and its beta shapes read alike.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from triage.cluster.objects import Obj, meta, name_of
from triage.cluster.selectors import node_selector_term_matches
from triage.layers.scheduling import dra_cel

_DRIVER_EQ = re.compile(r'device\.driver\s*==\s*["\']([^"\']+)["\']')


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
    node: str | None  # the one node it is on; None: the nodes `node_selector` picks, or all
    attributes: dict[str, Any]
    capacity: dict[str, Any]
    node_selector: Obj | None = None  # a NodeSelector; None with no `node`: every node

    @cached_property
    def env(self) -> dict[str, Any]:
        """What a CEL selector sees of the device."""
        return dra_cel.device_env(self.driver, self.attributes, self.capacity)

    def serves(self, node: str, node_obj: Callable[[str], Obj | None]) -> bool:
        """Whether a pod on `node` can be given this device."""
        if self.node is not None:
            return self.node == node
        if self.node_selector is None:
            return True
        obj = node_obj(node)
        terms = self.node_selector.get("nodeSelectorTerms") or []
        return obj is not None and any(node_selector_term_matches(t, obj) for t in terms)


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
        per_device = bool(spec.get("perDeviceNodeSelection"))
        for d in spec.get("devices") or []:
            body = d.get("basic") or d  # v1beta1 wraps a device under `basic`
            where = body if per_device else spec
            out.append(
                Device(
                    driver=str(spec.get("driver", "")),
                    pool=str((spec.get("pool") or {}).get("name", "")),
                    name=str(d.get("name", "")),
                    node=where.get("nodeName"),
                    attributes=body.get("attributes") or {},
                    capacity=body.get("capacity") or {},
                    node_selector=None if where.get("allNodes") else where.get("nodeSelector"),
                )
            )
    return out


def selector_matches(expr: str, device: Device) -> bool | None:
    """Whether the device satisfies a CEL selector; None when the expression is beyond what
    is evaluated here (`dra_cel`)."""
    return dra_cel.matches(expr, device.env)


@dataclass
class DraView:
    classes: dict[str, Obj]
    devices: list[Device]
    claims: list[Obj]  # every claim in the cluster, for what is already allocated
    plugin_pods: dict[str, list[Obj]] = field(default_factory=dict)  # DRA kubelet plugin, by node
    node_obj: Callable[[str], Obj | None] = lambda name: None  # for node selectors

    def nodes_with_devices(self, requests: list[Request]) -> set[str] | None:
        """Nodes publishing devices of the requested classes' drivers; None when any such
        device is not tied to one node (or no driver publishes anything: then no node is
        excluded)."""
        drivers = {self.class_driver(r.device_class) for r in requests}
        mine = [d for d in self.devices if None in drivers or d.driver in drivers]
        if not mine or any(d.node is None for d in mine):
            return None
        return {d.node for d in mine if d.node}

    def __post_init__(self) -> None:
        self._by_node: dict[str, list[Device]] = {}
        self.shared: list[Device] = []  # devices for a set of nodes, or for every node
        for d in self.devices:
            if d.node is None:
                self.shared.append(d)
            else:
                self._by_node.setdefault(d.node, []).append(d)
        self._matching: dict[tuple[str, tuple[str, ...]], tuple[list[Device], bool]] = {}
        self._ids: dict[int, tuple[list[Device], set[int]]] = {}

    def of_driver(self, driver: str | None) -> list[Device]:
        """The devices `driver` publishes (every device for None), computed once."""
        key = ("driver", (driver or "",))
        found = self._matching.get(key)
        if found is None:
            mine = [d for d in self.devices if driver is None or d.driver == driver]
            found = self._matching[key] = (mine, True)
        return found[0]

    def on(self, node: str, devices: list[Device]) -> list[Device]:
        """Those of `devices` a pod on `node` could be given (per node, without a pass over
        every device of the cluster)."""
        held = self._ids.get(id(devices))
        if held is None or held[0] is not devices:  # the lists asked for are the cached ones
            held = self._ids[id(devices)] = (devices, {id(d) for d in devices})
        wanted = held[1]
        here = [d for d in self._by_node.get(node, ()) if id(d) in wanted]
        here += [d for d in self.shared if id(d) in wanted and d.serves(node, self.node_obj)]
        return here

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
        """Devices matching the request's class and selectors, and whether all CEL was
        understood (computed once per class and selectors, however many nodes ask)."""
        key = (req.device_class, tuple(req.selectors))
        found = self._matching.get(key)
        if found is None:
            found = self._matching[key] = self._match(req)
        return found

    def _match(self, req: Request) -> tuple[list[Device], bool]:
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
