"""What DRA objects say, read as the scheduler reads them: a claim's requests, the devices
ResourceSlices publish (`resource.k8s.io/v1` and the beta shapes), which claims hold which
devices, and DeviceClass and request selectors. Selectors are CEL; the common forms (driver,
attribute and capacity comparisons) are evaluated here, anything else is reported as not
evaluated and assumed to match.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from triage.cluster.objects import Obj, meta, name_of
from triage.cluster.quantities import amount

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
