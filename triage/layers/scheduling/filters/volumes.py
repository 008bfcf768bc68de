"""The volume filters: VolumeRestrictions and VolumeBinding's PreFilter (pod level: a claim
that does not exist, is not bound under Immediate binding, is bound to a volume that is gone,
or is a ReadWriteOncePod claim in use), then per node NodeVolumeLimits (CSINode attach
limits), VolumeBinding (a bound volume's node affinity; a delayed claim's possible volumes)
and VolumeZone (a bound volume's zone labels).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

from triage.cluster.objects import Obj, labels, name_of, ns_of
from triage.cluster.quantities import amount
from triage.cluster.selectors import node_selector_term_matches
from triage.layers.scheduling.filters.view import FilterView, Refusal
from triage.layers.scheduling.framework import FilterPlugin, Phase
from triage.model import Layer
from triage.signals import Signal

ZONE_LABELS = (
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
)


NO_PROVISIONER = "kubernetes.io/no-provisioner"


DEFAULT_CLASS = "storageclass.kubernetes.io/is-default-class"


@dataclass(slots=True)
class Claim:
    volume: str  # the pod's volume name
    name: str  # the PersistentVolumeClaim's name
    pvc: Obj | None = None
    pv: Obj | None = None
    storage_class: Obj | None = None
    class_name: str = ""
    ephemeral: bool = False

    @property
    def bound(self) -> bool:
        return bool(((self.pvc or {}).get("spec") or {}).get("volumeName"))

    @property
    def delayed(self) -> bool:
        sc = self.storage_class or {}
        return sc.get("volumeBindingMode") == "WaitForFirstConsumer"

    @property
    def driver(self) -> str:
        """The CSI driver that attaches it: the volume's, else the class's provisioner."""
        csi = ((self.pv or {}).get("spec") or {}).get("csi") or {}
        if csi.get("driver"):
            return str(csi["driver"])
        provisioner = str((self.storage_class or {}).get("provisioner") or "")
        return "" if provisioner == NO_PROVISIONER else provisioner


def claim_names(pod: Obj) -> list[tuple[str, str, bool]]:
    """(volume, claim, ephemeral) for the pod's persistent and generic ephemeral volumes."""
    out = []
    for vol in (pod.get("spec") or {}).get("volumes") or []:
        pvc = vol.get("persistentVolumeClaim") or {}
        if pvc.get("claimName"):
            out.append((str(vol.get("name")), str(pvc["claimName"]), False))
        elif vol.get("ephemeral") and name_of(pod):  # a template's claims do not exist yet
            out.append((str(vol.get("name")), f"{name_of(pod)}-{vol.get('name')}", True))
    return out


class Volumes:
    def __init__(self, view: FilterView) -> None:
        self.view = view
        self.claims = [self._claim(v, c, e) for v, c, e in claim_names(view.pod)]

    def _claim(self, volume: str, name: str, ephemeral: bool) -> Claim:
        claim = Claim(volume, name, ephemeral=ephemeral)
        claim.pvc = self.view.get("PersistentVolumeClaim", name, self.view.namespace)
        spec = (claim.pvc or {}).get("spec") or {}
        if spec.get("volumeName"):
            claim.pv = self.view.get("PersistentVolume", str(spec["volumeName"]), None)
        raw = spec.get("storageClassName")
        if raw is None and claim.pvc is not None and claim.pv is None:
            default = next(
                (
                    sc
                    for sc in self.view.read("StorageClass", None)
                    if (sc.get("metadata") or {}).get("annotations", {}).get(DEFAULT_CLASS)
                    == "true"
                ),
                None,
            )
            raw = name_of(default) if default else ""
        claim.class_name = str(raw or "")
        if claim.class_name:
            claim.storage_class = self.view.get("StorageClass", claim.class_name, None)
        return claim

    def pre_filter(self) -> list[Signal]:
        """Reasons that stop the pod on every node, whatever the node."""
        out = []
        for c in self.claims:
            missing = self._missing(c)
            if missing is not None or c.pvc is None:
                out.extend([missing] if missing else [])
                continue
            if c.bound and c.pv is None:
                volume = str(c.pvc["spec"]["volumeName"])
                out.append(
                    Signal(
                        Layer.SCHEDULING,
                        "scheduling.pv-missing",
                        f"the pod's claim {c.name} is bound to PersistentVolume {volume}, "
                        "which does not exist",
                        values={"claim": c.name, "volume": volume},
                    )
                )
            elif not c.bound and (c.class_name and c.storage_class is None):
                out.append(self._unbound(c, f"its StorageClass {c.class_name} does not exist"))
            elif not c.bound and not c.delayed:
                out.append(self._unbound(c, self._binding_hint(c)))
            in_use = self._rwop_users(c)
            if in_use:
                who = [self.view.who(p) for p in in_use]
                out.append(
                    Signal(
                        Layer.SCHEDULING,
                        "scheduling.volume-in-use",
                        f"the pod's claim {c.name} is ReadWriteOncePod and already used by "
                        f"{who[0][0]}",
                        detail=[d for _, d in who if d],
                        values={"claim": c.name},
                    )
                )
        return out

    @staticmethod
    def _missing(c: Claim) -> Signal | None:
        """The claim does not exist, or is going away."""
        if c.pvc is not None and not (c.pvc.get("metadata") or {}).get("deletionTimestamp"):
            return None
        if c.pvc is not None:
            why, seen = "is being deleted", f"claim {c.name} has a deletionTimestamp"
        else:
            why, seen = "does not exist", f"volume {c.volume} names claim {c.name}"
            if c.ephemeral:
                why += (
                    f" (generic ephemeral volume {c.volume}: the ephemeral-volume controller "
                    "creates it)"
                )
        return Signal(
            Layer.SCHEDULING,
            "scheduling.pvc-missing",
            f"the pod's PersistentVolumeClaim {c.name} {why}",
            evidence=[seen],
            values={"claim": c.name},
        )

    def _unbound(self, c: Claim, why: str) -> Signal:
        evidence = [
            f"claim {c.name}: phase {((c.pvc or {}).get('status') or {}).get('phase', 'Pending')}"
            f", StorageClass {c.class_name or '(none)'}"
        ]
        evidence += [str(e) for e in self.view.events("PersistentVolumeClaim", c.name)[:3]]
        return Signal(
            Layer.SCHEDULING,
            "scheduling.pvc-unbound",
            f"the pod's PersistentVolumeClaim {c.name} is not bound to a volume ({why}): "
            "the scheduler waits for it",
            evidence=evidence,
            values={"claim": c.name, "storage_class": c.class_name or "(none)"},
        )

    @staticmethod
    def _binding_hint(c: Claim) -> str:
        if not c.class_name:
            return "no StorageClass: it binds only to a matching pre-created PersistentVolume"
        provisioner = (c.storage_class or {}).get("provisioner") or "?"
        if provisioner == NO_PROVISIONER:
            return f"StorageClass {c.class_name} has no provisioner and no volume matches it"
        return f"StorageClass {c.class_name}, Immediate binding: provisioner {provisioner} has not provided a volume"

    def _rwop_users(self, c: Claim) -> list[Obj]:
        modes = ((c.pvc or {}).get("spec") or {}).get("accessModes") or []
        if "ReadWriteOncePod" not in modes:
            return []
        me = name_of(self.view.pod)
        return [
            p
            for p in self.view.active_pods(self.view.namespace)
            if name_of(p) != me
            and (p.get("spec") or {}).get("nodeName")
            and any(claim == c.name for _, claim, _ in claim_names(p))
        ]

    def filter(self, node: str, obj: Obj) -> Refusal | None:
        """NodeVolumeLimits, VolumeBinding and VolumeZone, in the scheduler's order."""
        for check in (self._volume_limits, self._volume_binding, self._volume_zone):
            refusal = check(node, obj)
            if refusal is not None:
                return refusal
        return None

    def _volume_limits(self, node: str, obj: Obj) -> Refusal | None:
        """NodeVolumeLimits: CSINode's attach limit per driver."""
        new = Counter(c.driver for c in self.claims if c.driver and c.pvc is not None)
        if not new:
            return None
        csinode = self.view.get("CSINode", node, None)
        limits = {
            str(d.get("name")): int(str(count))
            for d in ((csinode or {}).get("spec") or {}).get("drivers") or []
            if str(count := (d.get("allocatable") or {}).get("count")).isdigit()
        }
        if not any(d in limits for d in new):
            return None
        attached: dict[str, set[str]] = defaultdict(set)
        for other in self.view.pods_on(node):
            for _, claim, _ in claim_names(other):
                pvc = self.view.get("PersistentVolumeClaim", claim, ns_of(other)) or {}
                volume = (pvc.get("spec") or {}).get("volumeName")
                pv = self.view.get("PersistentVolume", str(volume), None) if volume else None
                csi = ((pv or {}).get("spec") or {}).get("csi") or {}
                if csi.get("driver"):
                    attached[str(csi["driver"])].add(str(csi.get("volumeHandle") or volume))
        mine = {c.name for c in self.claims}
        for driver, count in new.items():
            if driver not in limits:
                continue
            used = len(attached[driver])
            already = sum(
                1
                for c in self.claims
                if c.driver == driver
                and c.pv is not None
                and ((c.pv.get("spec") or {}).get("csi") or {}).get("volumeHandle")
                in attached[driver]
            )
            if used + count - already > limits[driver]:
                return Refusal(
                    "scheduling.volume-limit",
                    f"node {node}: {used}/{limits[driver]} {driver} volumes attached "
                    f"(CSINode limit), the pod adds {count - already} ({', '.join(sorted(mine))})",
                    {"driver": driver},
                )
        return None

    def _volume_binding(self, node: str, obj: Obj) -> Refusal | None:
        """VolumeBinding: a bound volume's node affinity, or no volume for a delayed claim."""
        for c in self.claims:
            if c.pvc is None:
                continue
            if c.pv is not None:
                terms = (
                    ((c.pv.get("spec") or {}).get("nodeAffinity") or {}).get("required") or {}
                ).get("nodeSelectorTerms") or []
                if terms and not any(node_selector_term_matches(t, obj) for t in terms):
                    where = _terms_str(terms)
                    return Refusal(
                        "scheduling.volume-node-affinity",
                        f"node {node}{_zone_of(obj)}: volume {name_of(c.pv)} of claim {c.name} "
                        f"attaches only where {where}",
                        {"volume": name_of(c.pv), "claim": c.name, "where": where},
                    )
            elif not c.bound and c.delayed:
                why = self._no_volume_here(c, obj)
                if why is not None:
                    return Refusal(
                        "scheduling.volume-unavailable",
                        f"node {node}{_zone_of(obj)}: {why}",
                        {"claim": c.name, "storage_class": c.class_name},
                    )
        return None

    def _no_volume_here(self, c: Claim, node: Obj) -> str | None:
        """Why a WaitForFirstConsumer claim can get no volume on `node`, or None."""
        sc = c.storage_class or {}
        if sc.get("provisioner") != NO_PROVISIONER:
            terms = _as_node_terms(sc.get("allowedTopologies") or [])
            if terms and not any(node_selector_term_matches(t, node) for t in terms):
                return (
                    f"StorageClass {c.class_name} provisions volumes only where {_terms_str(terms)}"
                )
            return None
        want = amount(
            "storage", (((c.pvc or {}).get("spec") or {}).get("resources") or {}).get("requests", {}).get("storage", 0)
        )  # fmt: skip
        modes = set(((c.pvc or {}).get("spec") or {}).get("accessModes") or [])
        for pv in self._local_volumes(c.class_name):
            spec = pv.get("spec") or {}
            terms = ((spec.get("nodeAffinity") or {}).get("required") or {}).get(
                "nodeSelectorTerms"
            ) or []
            if (
                amount("storage", (spec.get("capacity") or {}).get("storage", 0)) >= want
                and modes <= set(spec.get("accessModes") or [])
                and (not terms or any(node_selector_term_matches(t, node) for t in terms))
            ):
                return None
        return f"no Available PersistentVolume of StorageClass {c.class_name} there fits claim {c.name}"

    def _local_volumes(self, class_name: str) -> list[Obj]:
        return [
            pv
            for pv in self.view.read("PersistentVolume", None)
            if (pv.get("spec") or {}).get("storageClassName") == class_name
            and (pv.get("status") or {}).get("phase") == "Available"
            and not (pv.get("spec") or {}).get("claimRef")
        ]

    def _volume_zone(self, node: str, obj: Obj) -> Refusal | None:
        """VolumeZone: a bound volume's zone and region labels against the node's."""
        node_labels = labels(obj)
        for c in self.claims:
            if c.pv is None:
                continue
            for key in ZONE_LABELS:
                value = labels(c.pv).get(key)
                if value and node_labels.get(key) not in value.split("__"):
                    return Refusal(
                        "scheduling.volume-zone",
                        f"node {node} is in {key}={node_labels.get(key, '(none)')}, volume "
                        f"{name_of(c.pv)} of claim {c.name} in {value}",
                        {"volume": name_of(c.pv), "claim": c.name, "zone": value},
                    )
        return None


def _zone_of(node: Obj) -> str:
    zone = labels(node).get("topology.kubernetes.io/zone")
    return f" ({zone})" if zone else ""


def _terms_str(terms: list[Obj]) -> str:
    def one(term: Obj) -> str:
        return (
            " and ".join(
                f"{e.get('key')} {str(e.get('operator', 'In')).lower()} ({','.join(e.get('values') or [])})"
                for e in term.get("matchExpressions") or []
            )
            or "(no expression)"
        )

    return " or ".join(one(t) for t in terms)


def _as_node_terms(topologies: list[Obj]) -> list[Obj]:
    """A StorageClass's allowedTopologies (matchLabelExpressions, each an implicit In) as
    node selector terms, so one matcher judges both."""
    return [
        {
            "matchExpressions": [
                {**e, "operator": "In"} for e in t.get("matchLabelExpressions") or []
            ]
        }
        for t in topologies
    ]


PLUGIN = FilterPlugin(
    name="VolumeBinding",  # and VolumeRestrictions, NodeVolumeLimits, VolumeZone
    phase=Phase.AFTER_FIT,
    category="volume",
    reasons={
        "scheduling.pvc-missing": "",  # pod-level: the signal writes its own headline
        "scheduling.pvc-unbound": "",
        "scheduling.pv-missing": "",
        "scheduling.volume-in-use": "",
        "scheduling.volume-limit": "{n} of {c} node(s) with room for the pod are at their "
        "CSINode attach limit for {driver} volumes",
        "scheduling.volume-node-affinity": "the pod's volume {volume} (claim {claim}) attaches "
        "only where {where}, and none of the {n} node(s) with room for the pod is there",
        "scheduling.volume-zone": "the pod's volume {volume} (claim {claim}) is in {zone}, and "
        "none of the {n} node(s) with room for the pod is there",
        "scheduling.volume-unavailable": "the pod's claim {claim} (StorageClass "
        "{storage_class}) can get no volume on the {n} node(s) with room for the pod",
    },
    scheduler_says=(
        "had volume node affinity conflict", "unbound immediate PersistentVolumeClaims",
        "exceed max volume count", "didn't find available persistent volumes",
        "had no available volume zone", "did not have enough free storage",
        "bound to non-existent pv", "persistentvolumeclaim", "ReadWriteOncePod",
    ),
    pod_fields=(
        "spec.volumes[].name", "spec.volumes[].persistentVolumeClaim",
        "spec.volumes[].ephemeral", "metadata.name", "metadata.namespace",
    ),
    applies=lambda pod: bool(claim_names(pod)),
    make=Volumes,
)  # fmt: skip
