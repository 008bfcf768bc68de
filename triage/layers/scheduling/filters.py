"""The scheduler's filters that look past the node itself: host ports, volumes, topology spread
and pod (anti-)affinity, judged per node from the objects they read.

kube-scheduler runs NodePorts before NodeResourcesFit and VolumeRestrictions, NodeVolumeLimits,
VolumeBinding, VolumeZone, PodTopologySpread and InterPodAffinity after it; for one node the
first failing filter is its reason, as in the scheduler's FitError. Failures that hold on
every node (a claim that does not exist, is not bound under Immediate binding, is bound to a
volume that is gone, or is a ReadWriteOncePod claim in use) are the plugins' PreFilter: they
become pod-level signals. The filters are built only for a pod that has such constraints (or
when the scheduler reports existing pods' anti-affinity), so an ordinary GPU pod keeps the
placement fast path.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cached_property

from triage.cluster.events import Event
from triage.cluster.objects import Obj, labels, name_of, ns_of, pod_terminated
from triage.cluster.quantities import amount
from triage.cluster.selectors import (
    label_selector_matches,
    node_selector_term_matches,
    selector_mismatch,
    selector_str,
)
from triage.cluster.usage import NodeUsage
from triage.model import Layer
from triage.signals import Signal

Get = Callable[[str, str, "str | None"], "Obj | None"]
Read = Callable[[str, "str | None"], list[Obj]]
Events = Callable[[str, str], list[Event]]

ZONE_LABELS = (
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
)
NO_PROVISIONER = "kubernetes.io/no-provisioner"
DEFAULT_CLASS = "storageclass.kubernetes.io/is-default-class"


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why one filter rejects one node: the signal code, a line about the node, and the
    placeholders the layer's headline for that code fills."""

    code: str
    text: str
    values: Mapping[str, str] = field(default_factory=dict)
    detail: tuple[str, ...] = ()


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


def host_ports(pod: Obj) -> set[tuple[str, str, int]]:
    """(protocol, hostIP, hostPort) of every container port bound on the node."""
    spec = pod.get("spec") or {}
    out = set()
    for ctr in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        for port in ctr.get("ports") or []:
            if port.get("hostPort"):
                out.add(
                    (
                        str(port.get("protocol") or "TCP"),
                        str(port.get("hostIP") or "0.0.0.0"),
                        int(port["hostPort"]),
                    )
                )
    return out


def _ports_clash(a: tuple[str, str, int], b: tuple[str, str, int]) -> bool:
    wild = "0.0.0.0"
    return a[0] == b[0] and a[2] == b[2] and (a[1] == b[1] or wild in (a[1], b[1]))


def pods_on(node: str, usage: Mapping[str, NodeUsage], get: Get) -> list[Obj]:
    """The objects of the pods bound to `node` (by the usage index), those that still exist."""
    use = usage.get(node)
    found = (
        get("Pod", name, ns)
        for ns, _, name in (r.partition("/") for r in (use.pods if use else ()))
    )
    return [p for p in found if p is not None]


def _claim_names(pod: Obj) -> list[tuple[str, str, bool]]:
    """(volume, claim, ephemeral) for the pod's persistent and generic ephemeral volumes."""
    out = []
    for vol in (pod.get("spec") or {}).get("volumes") or []:
        pvc = vol.get("persistentVolumeClaim") or {}
        if pvc.get("claimName"):
            out.append((str(vol.get("name")), str(pvc["claimName"]), False))
        elif vol.get("ephemeral") and name_of(pod):  # a template's claims do not exist yet
            out.append((str(vol.get("name")), f"{name_of(pod)}-{vol.get('name')}", True))
    return out


def _affinity(pod: Obj, kind: str) -> list[Obj]:
    aff = ((pod.get("spec") or {}).get("affinity") or {}).get(kind) or {}
    return list(aff.get("requiredDuringSchedulingIgnoredDuringExecution") or [])


def _spread(pod: Obj) -> list[Obj]:
    return [
        c
        for c in (pod.get("spec") or {}).get("topologySpreadConstraints") or []
        if c.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule" and c.get("topologyKey")
    ]


def needs_filters(pod: Obj) -> bool:
    """Whether the pod carries any constraint these filters judge."""
    return bool(
        host_ports(pod)
        or _claim_names(pod)
        or _spread(pod)
        or _affinity(pod, "podAffinity")
        or _affinity(pod, "podAntiAffinity")
    )


def _with_keys(selector: Obj | None, keys: list[str], pod_labels: dict[str, str]) -> Obj | None:
    """A term's selector with its matchLabelKeys merged in from the incoming pod's labels."""
    if selector is None or not keys:
        return selector
    extra = {k: pod_labels[k] for k in keys if k in pod_labels}
    return {**selector, "matchLabels": {**(selector.get("matchLabels") or {}), **extra}}


def _active(pod: Obj) -> bool:
    return not pod_terminated(pod) and not (pod.get("metadata") or {}).get("deletionTimestamp")


class PodFilters:
    """The filters for one pod, over one view of the cluster. Build with `for_pod`."""

    def __init__(
        self,
        pod: Obj,
        *,
        get: Get,
        read: Read,
        events: Events,
        nodes: list[Obj],
        usage: Mapping[str, NodeUsage],
        existing_anti_affinity: bool = False,
    ) -> None:
        self.pod, self._get, self._read, self._events = pod, get, read, events
        self.namespace = ns_of(pod)
        self.nodes = {name_of(n): n for n in nodes}
        self.usage = usage
        self.ports = host_ports(pod)
        self.spread = _spread(pod)
        self.affinity = _affinity(pod, "podAffinity")
        self.anti_affinity = _affinity(pod, "podAntiAffinity")
        self.check_existing = existing_anti_affinity
        self.claims = [self._claim(v, c, e) for v, c, e in _claim_names(pod)]

    # --- reading ---------------------------------------------------------------------------

    def _claim(self, volume: str, name: str, ephemeral: bool) -> Claim:
        claim = Claim(volume, name, ephemeral=ephemeral)
        claim.pvc = self._get("PersistentVolumeClaim", name, self.namespace)
        spec = (claim.pvc or {}).get("spec") or {}
        if spec.get("volumeName"):
            claim.pv = self._get("PersistentVolume", str(spec["volumeName"]), None)
        raw = spec.get("storageClassName")
        if raw is None and claim.pvc is not None and claim.pv is None:
            default = next(
                (
                    sc
                    for sc in self._read("StorageClass", None)
                    if (sc.get("metadata") or {}).get("annotations", {}).get(DEFAULT_CLASS)
                    == "true"
                ),
                None,
            )
            raw = name_of(default) if default else ""
        claim.class_name = str(raw or "")
        if claim.class_name:
            claim.storage_class = self._get("StorageClass", claim.class_name, None)
        return claim

    def _pods_on(self, node: str) -> list[Obj]:
        return pods_on(node, self.usage, self._get)

    @cached_property
    def _namespaces(self) -> dict[str, dict[str, str]]:
        return {name_of(n): labels(n) for n in self._read("Namespace", None)}

    def _term_namespaces(self, term: Obj, home: str) -> set[str] | None:
        """The namespaces a pod-affinity term looks in (None: all of them)."""
        names = set(term.get("namespaces") or [])
        sel = term.get("namespaceSelector")
        if sel is not None:
            if not sel.get("matchLabels") and not sel.get("matchExpressions"):
                return None
            names |= {n for n, lab in self._namespaces.items() if label_selector_matches(sel, lab)}
        return names if names or sel is not None else {home}

    def _bound_pods(self, namespaces: set[str] | None) -> list[Obj]:
        pods = (
            self._read("Pod", None)
            if namespaces is None
            else [p for ns in sorted(namespaces) for p in self._read("Pod", ns)]
        )
        return [p for p in pods if (p.get("spec") or {}).get("nodeName") and _active(p)]

    def _domain(self, node: str, key: str) -> str | None:
        n = self.nodes.get(node)
        return labels(n).get(key) if n is not None else None

    def _who(self, pod: Obj) -> tuple[str, str]:
        """(tenant-safe text, operator detail) naming a pod the asker may not see."""
        ref = f"{ns_of(pod)}/{name_of(pod)}"
        if ns_of(pod) == self.namespace:
            return ref, ""
        return "a pod in another namespace", ref

    # --- pod level (PreFilter) -------------------------------------------------------------

    def pod_level(self) -> list[Signal]:
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
                who = [self._who(p) for p in in_use]
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
        evidence += [str(e) for e in self._events("PersistentVolumeClaim", c.name)[:3]]
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
        me = name_of(self.pod)
        return [
            p
            for p in self._read("Pod", self.namespace)
            if name_of(p) != me
            and _active(p)
            and (p.get("spec") or {}).get("nodeName")
            and any(claim == c.name for _, claim, _ in _claim_names(p))
        ]

    # --- per node --------------------------------------------------------------------------

    def before_fit(self, node: str) -> Refusal | None:
        """NodePorts: a host port the pod binds is taken on the node."""
        if not self.ports:
            return None
        for other in self._pods_on(node):
            for mine in self.ports:
                theirs = next((p for p in host_ports(other) if _ports_clash(mine, p)), None)
                if theirs is not None:
                    who, detail = self._who(other)
                    port = f"{mine[0]}/{mine[2]}"
                    return Refusal(
                        "scheduling.node-ports",
                        f"node {node}: host port {port} is taken by {who}",
                        {"port": port},
                        (f"node {node}: host port {port} held by {detail}",) if detail else (),
                    )
        return None

    def after_fit(self, node: str) -> Refusal | None:
        """The filters after NodeResourcesFit, in the scheduler's order."""
        obj = self.nodes.get(node)
        if obj is None:
            return None
        for check in (
            self._volume_limits,
            self._volume_binding,
            self._volume_zone,
            self._topology_spread,
            self._inter_pod_affinity,
        ):
            refusal = check(node, obj)
            if refusal is not None:
                return refusal
        return None

    def _volume_limits(self, node: str, obj: Obj) -> Refusal | None:
        """NodeVolumeLimits: CSINode's attach limit per driver."""
        new = Counter(c.driver for c in self.claims if c.driver and c.pvc is not None)
        if not new:
            return None
        csinode = self._get("CSINode", node, None)
        limits = {
            str(d.get("name")): int(str(count))
            for d in ((csinode or {}).get("spec") or {}).get("drivers") or []
            if str(count := (d.get("allocatable") or {}).get("count")).isdigit()
        }
        if not any(d in limits for d in new):
            return None
        attached: dict[str, set[str]] = defaultdict(set)
        for other in self._pods_on(node):
            for _, claim, _ in _claim_names(other):
                pvc = self._get("PersistentVolumeClaim", claim, ns_of(other)) or {}
                volume = (pvc.get("spec") or {}).get("volumeName")
                pv = self._get("PersistentVolume", str(volume), None) if volume else None
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
            for pv in self._read("PersistentVolume", None)
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

    @cached_property
    def _spread_counts(self) -> list[tuple[Obj, Obj | None, dict[str, int], bool]]:
        """Per DoNotSchedule constraint: (constraint, selector, matching pods per domain,
        whether the incoming pod counts itself)."""
        pod_labels = labels(self.pod)
        keys = [str(c["topologyKey"]) for c in self.spread]
        eligible = {
            name
            for name, n in self.nodes.items()
            # nodeAffinityPolicy Honor (the default): only nodes the pod's selector and
            # required node affinity accept count as domains.
            if all(k in labels(n) for k in keys) and not selector_mismatch(self.pod, n)
        }
        pods = self._bound_pods({self.namespace})
        out = []
        for c in self.spread:
            key = str(c["topologyKey"])
            sel = _with_keys(c.get("labelSelector"), c.get("matchLabelKeys") or [], pod_labels)
            counts = {labels(self.nodes[n])[key]: 0 for n in eligible}
            for p in pods:
                where = str((p.get("spec") or {}).get("nodeName"))
                if where in eligible and label_selector_matches(sel, labels(p)):
                    counts[labels(self.nodes[where])[key]] += 1
            out.append((c, sel, counts, label_selector_matches(sel, pod_labels)))
        return out

    def _topology_spread(self, node: str, obj: Obj) -> Refusal | None:
        for c, sel, counts, self_match in self._spread_counts if self.spread else ():
            key, skew_max = str(c["topologyKey"]), int(c.get("maxSkew") or 1)
            value = labels(obj).get(key)
            base = {"key": key, "max_skew": str(skew_max), "selector": selector_str(sel)}
            if value is None:
                return Refusal(
                    "scheduling.topology-spread-label",
                    f"node {node} lacks label {key}, which the pod's topology spread needs",
                    base,
                )
            low = min(counts.values(), default=0)
            if len(counts) < int(c.get("minDomains") or 0):
                low = 0
            skew = counts.get(value, 0) + int(self_match) - low
            if skew > skew_max:
                emptiest = min(counts, key=lambda d: (counts[d], d)) if counts else "?"
                return Refusal(
                    "scheduling.topology-spread",
                    f"node {node}: {key}={value} holds {counts.get(value, 0)} pod(s) matching "
                    f"{selector_str(sel)}, {emptiest} holds {low}: skew {skew} > maxSkew {skew_max}",
                    {**base, "emptiest": emptiest, "fewest": str(low)},
                )
        return None

    @cached_property
    def _affinity_domains(self) -> list[tuple[str, Obj, Obj | None, dict[str, list[Obj]]]]:
        """Per required pod (anti-)affinity term of the incoming pod: (kind, term, selector,
        matching running pods per topology value)."""
        pod_labels = labels(self.pod)
        out = []
        for kind, terms in (("affinity", self.affinity), ("anti", self.anti_affinity)):
            for term in terms:
                key = str(term.get("topologyKey") or "")
                sel = _with_keys(
                    term.get("labelSelector"), term.get("matchLabelKeys") or [], pod_labels
                )
                found: dict[str, list[Obj]] = defaultdict(list)
                for p in self._bound_pods(self._term_namespaces(term, self.namespace)):
                    value = self._domain(str(p["spec"]["nodeName"]), key)
                    if value is not None and label_selector_matches(sel, labels(p)):
                        found[value].append(p)
                out.append((kind, term, sel, dict(found)))
        return out

    @cached_property
    def _first_of_group(self) -> bool:
        """No pod matches the affinity terms anywhere and the pod matches them itself: the
        scheduler lets the first pod of a group go anywhere."""
        terms = [
            (t, sel, found) for kind, t, sel, found in self._affinity_domains if kind == "affinity"
        ]
        return all(not found for _, _, found in terms) and all(
            label_selector_matches(sel, labels(self.pod))
            and _covers(self._term_namespaces(t, self.namespace), self.namespace)
            for t, sel, _ in terms
        )

    def _inter_pod_affinity(self, node: str, obj: Obj) -> Refusal | None:
        if self.affinity or self.anti_affinity:
            for kind, term, sel, found in self._affinity_domains:
                key = str(term.get("topologyKey") or "")
                value = labels(obj).get(key)
                values = {"key": key, "selector": selector_str(sel)}
                if (
                    kind == "affinity"
                    and not self._first_of_group
                    and (value is None or value not in found)
                ):
                    return Refusal(
                        "scheduling.pod-affinity",
                        f"node {node}: no pod matching {selector_str(sel)} runs in its {key}"
                        f" ({value or 'node lacks the label'})",
                        values,
                    )
                if kind == "anti" and value is not None and found.get(value):
                    who = [self._who(p) for p in found[value]]
                    return Refusal(
                        "scheduling.pod-anti-affinity",
                        f"node {node}: {key}={value} already runs {who[0][0]}"
                        + (f" and {len(who) - 1} more" if len(who) > 1 else "")
                        + f" matching {selector_str(sel)}",
                        values,
                        tuple(f"node {node}: anti-affinity match {d}" for _, d in who if d),
                    )
        if self.check_existing:
            return self._existing_anti_affinity(node, obj)
        return None

    @cached_property
    def _forbidden(self) -> list[tuple[str, str, Obj]]:
        """(topology key, value, pod) where a running pod's required anti-affinity matches
        the incoming pod."""
        pod_labels, out = labels(self.pod), []
        for p in self._bound_pods(None):
            for term in _affinity(p, "podAntiAffinity"):
                if not _covers(self._term_namespaces(term, ns_of(p)), self.namespace):
                    continue
                sel = _with_keys(
                    term.get("labelSelector"), term.get("matchLabelKeys") or [], labels(p)
                )
                key = str(term.get("topologyKey") or "")
                value = self._domain(str(p["spec"]["nodeName"]), key)
                if value is not None and label_selector_matches(sel, pod_labels):
                    out.append((key, value, p))
        return out

    def _existing_anti_affinity(self, node: str, obj: Obj) -> Refusal | None:
        node_labels = labels(obj)
        for key, value, p in self._forbidden:
            if node_labels.get(key) == value:
                who, detail = self._who(p)
                return Refusal(
                    "scheduling.existing-anti-affinity",
                    f"node {node}: {who} in its {key} ({value}) keeps pods like this one out "
                    "(that pod's required anti-affinity)",
                    {"key": key},
                    (f"node {node}: anti-affinity of {detail}",) if detail else (),
                )
        return None


def _covers(namespaces: set[str] | None, namespace: str) -> bool:
    """Whether a term's namespaces (None: all) include `namespace`."""
    return namespaces is None or namespace in namespaces


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
