"""Where could this pod run? Evaluates every node against the pod as the scheduler would.

Two questions per node, kept apart on purpose (the root-cause rule needs both):
1. Is the node one the pod could *ever* use? (nodeName, nodeSelector, required affinity,
   untolerated taints, GPU presence, size.) If not, its problems are side findings.
2. If so, what stops the pod there *now*, at the lowest layer: node down or driver broken,
   GPUs not advertised, cordoned or short of free resources.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from triage.kubeobj import (
    GPU,
    MIG_PREFIX,
    fmt_amount,
    labels,
    node_selector_term_matches,
    required_affinity_terms,
    selector_mismatch,
    taint_str,
    untolerated_taints,
)
from triage.model import Layer
from triage.nodehealth import NodeHealth, expected_gpu_count
from triage.source import NodeUsage, Obj

# Pods of these namespaces are infrastructure, not the tenants competing for a node.
SYSTEM_NAMESPACES = (
    "kube-system/",
    "gpu-operator/",
    "kube-flannel/",
    "calico-system/",
    "monitoring/",
)

# Taints that reflect node health or cordoning: judged as such, not as a pod/taint mismatch.
HEALTH_TAINTS = (
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
    "node.kubernetes.io/unschedulable",
)


class NodeFit:
    """One node judged for one pod. Attributes default at class level: one of these is made
    per node per triage, and most nodes only ever set `exclusion` and `why`."""

    exclusion: str | None = None  # category when the pod could never use the node
    why: Callable[[], str] | None = None
    layer: Layer | None = None  # lowest layer blocking the pod here now; None = usable
    code: str = ""
    text: str = ""
    detail: list[str] | tuple[str, ...] = ()
    gfd_labels_missing: bool = False
    joining: str | None = None  # set when the node will likely be usable within minutes
    lazy: Callable[[], tuple[str, list[str]]] | None = None

    def __init__(self, node: str) -> None:
        self.node = node

    def __repr__(self) -> str:
        return f"NodeFit({self.node!r}, exclusion={self.exclusion!r}, layer={self.layer}, code={self.code!r})"

    def describe(self) -> tuple[str, list[str] | tuple[str, ...]]:
        """(text, operator-only detail) of what blocks the pod here, built on first use."""
        if self.lazy is not None:
            self.text, self.detail = self.lazy()
            self.lazy = None
        return self.text, self.detail

    @property
    def exclusion_text(self) -> str:
        return self.why() if self.why is not None else ""

    @property
    def candidate(self) -> bool:
        return self.exclusion is None

    @property
    def usable(self) -> bool:
        return self.candidate and self.layer is None and self.joining is None


def wants_gpu(pod: Obj, requests: Mapping[str, int]) -> bool:
    """NVIDIA extended resources, or devices claimed through DRA."""
    return any(r.startswith("nvidia.com/") for r in requests) or bool(
        (pod.get("spec") or {}).get("resourceClaims")
    )


Why = Callable[[], str]


def _selector_text(pod: Obj, node: Obj, name: str) -> str:
    missing = ", ".join(selector_mismatch(pod, node))
    product = labels(node).get("nvidia.com/gpu.product") or ""
    extra = f" [node product {product}]" if product and "gpu.product" not in missing else ""
    if "gpu.product" in missing and "-MIG-" in product:
        extra += " (MIG single strategy: the product label carries the MIG profile)"
    elif "gpu.product" in missing and product.endswith("-SHARED"):
        extra += " (GPU sharing: the product label gains -SHARED)"
    return f"node {name}: nodeSelector/affinity {missing}{extra}"


def _static_exclusion(
    pod: Obj, node: Obj, health: NodeHealth, requests: Mapping[str, int], gpu: bool
) -> tuple[str, Why | None, bool] | None:
    """(category, lazy explanation, GFD labels missing) or None when the node is a candidate.

    Runs for every node on every triage, so the texts are only built when shown.
    """
    spec = pod.get("spec") or {}
    name = health.name
    bound = spec.get("nodeName")
    if bound and bound != name:
        return "other node", lambda: f"pod is bound to node {bound}", False
    if gpu and not health.gpu_node:
        return "no GPU", lambda: f"node {name} has no NVIDIA GPU", False
    gfd_missing = False
    selector = spec.get("nodeSelector") or {}
    terms = required_affinity_terms(pod) if spec.get("affinity") else None
    if selector or terms is not None:
        node_labels = labels(node)
        bad = [k for k, v in selector.items() if node_labels.get(k) != v]
        affinity_fails = terms is not None and not any(
            node_selector_term_matches(t, node) for t in terms
        )
        if bad or affinity_fails:
            # Labels that GPU feature discovery writes vanish when the driver is down: a node
            # that only lacks those labels and has a broken driver is one the pod could use.
            gfd_only = not affinity_fails and all(
                k.startswith("nvidia.com/") and k not in node_labels for k in bad
            )
            if not (gfd_only and not health.driver.ok):
                return "selector mismatch", lambda: _selector_text(pod, node, name), False
            gfd_missing = True
    taints = untolerated_taints(pod, node, ignore=HEALTH_TAINTS)
    if taints:
        text = ", ".join(taint_str(t) for t in taints)
        return (
            f"untolerated taint {taints[0].get('key')}",
            lambda: f"node {name}: untolerated taint {text}",
            False,
        )
    alloc_all = health.allocatable_all
    for res, want in requests.items():
        if res.startswith("nvidia.com/"):
            expected = expected_gpu_count(node, health, res)
            if expected is not None and want > expected:
                return (
                    "too small",
                    lambda r=res, w=want, e=expected: (
                        f"node {name}: offers at most {e} {r}, pod requests {w}"
                    ),
                    False,
                )
        elif res in alloc_all and want > alloc_all[res]:
            text = (
                f"node {name}: allocatable {res} {fmt_amount(res, alloc_all[res])} "
                f"< requested {fmt_amount(res, want)}"
            )
            return "too small", lambda t=text: t, False
    return None if not gfd_missing else ("", None, True)


DraCheck = Callable[[str], "tuple[Layer, str, str] | None"]


class Placement:
    """Evaluates every node for one pod. Whether a node could ever take the pod depends only on
    its signature and the labels the pod's selectors mention, so each node pool is judged once
    and the per-node work is left to the nodes that pass (5,000 nodes, one triage)."""

    def __init__(
        self,
        *,
        pod: Obj,
        requests: Mapping[str, int],
        dra: DraCheck | None = None,
        only_nodes: set[str] | None = None,
    ) -> None:
        self.pod, self.requests, self.dra = pod, requests, dra
        self.only_nodes = only_nodes  # DRA: nodes publishing devices for the pod's claims
        self.gpu = wants_gpu(pod, requests)
        self.gpu_resources = tuple(r for r in requests if r.startswith("nvidia.com/"))
        spec = pod.get("spec") or {}
        terms = required_affinity_terms(pod) or []
        self.per_node = bool(spec.get("nodeName")) or any(t.get("matchFields") for t in terms)
        keys = list((spec.get("nodeSelector") or {}).keys())
        keys += [e.get("key", "") for t in terms for e in t.get("matchExpressions") or []]
        self.keys = tuple(dict.fromkeys(keys))
        self._classes: dict[object, tuple[object, tuple[str, bool] | None]] = {}

    def _static(self, node: Obj, health: NodeHealth) -> tuple[str, bool] | None:
        if self.per_node:
            excl = _static_exclusion(self.pod, node, health, self.requests, self.gpu)
            return None if excl is None else (excl[0], excl[2])
        # Keyed by the signature's precomputed hash (hashing the tuple again for every node
        # costs more than the rest of this loop); a hit is confirmed by the signature itself.
        if self.keys:
            node_labels = node["metadata"].get("labels") or {}
            key: object = (health.signature_hash, tuple(map(node_labels.get, self.keys)))
        else:
            key = health.signature_hash
        hit = self._classes.get(key)
        if hit is None or not (hit[0] is health.signature or hit[0] == health.signature):
            excl = _static_exclusion(self.pod, node, health, self.requests, self.gpu)
            hit = self._classes[key] = (
                health.signature,
                None if excl is None else (excl[0], excl[2]),
            )
        return hit[1]

    def fit(self, node: Obj, health: NodeHealth, usage: NodeUsage | None) -> NodeFit:
        fit = NodeFit(health.name)
        if self.only_nodes is not None and health.name not in self.only_nodes:
            fit.exclusion = "no DRA devices"
            fit.why = lambda: (
                f"node {health.name} publishes no devices for the pod's ResourceClaims"
            )
            return fit
        static = self._static(node, health)
        if static is not None:
            category, gfd_missing = static
            if category:
                fit.exclusion = category
                fit.why = lambda: self._why(node, health)
                return fit
            fit.gfd_labels_missing = gfd_missing
        if (
            health.clean
            and self.dra is None
            and not fit.gfd_labels_missing
            and all(health.allocatable_all.get(res) for res in self.gpu_resources)
        ):
            # The common case on a big cluster: a healthy node that offers what the pod asks
            # for, so only its free resources matter.
            if _short(health.allocatable_all, self.requests, usage):
                _insufficient(fit, health, self.requests, usage)
            return fit
        return _dynamic(
            fit,
            node=node,
            health=health,
            requests=self.requests,
            usage=usage,
            dra=self.dra,
            gpu=self.gpu,
        )

    def _why(self, node: Obj, health: NodeHealth) -> str:
        excl = _static_exclusion(self.pod, node, health, self.requests, self.gpu)
        return excl[1]() if excl is not None and excl[1] is not None else ""


def _dynamic(
    fit: NodeFit,
    *,
    node: Obj,
    health: NodeHealth,
    requests: Mapping[str, int],
    usage: NodeUsage | None,
    dra: DraCheck | None,
    gpu: bool,
) -> NodeFit:
    """What stops the pod on a node it could use, now, at the lowest layer."""
    name = health.name
    if gpu and health.joining:
        fit.joining = health.joining
        return fit
    if not health.driver.ok and (gpu or health.driver.code == "driver.node-not-ready"):
        fit.layer, fit.code, fit.text = Layer.DRIVER, health.driver.code, health.driver.text
        fit.detail = list(health.driver.detail)
        return fit
    if gpu:
        plugin = _plugin_block(health, requests, usage)
        if plugin is not None:
            fit.layer = Layer.DEVICE_PLUGIN
            fit.code, fit.text, fit.detail = plugin
            return fit
    if dra is not None:
        claim_block = dra(name)
        if claim_block is not None:
            fit.layer, fit.code, fit.text = claim_block
            return fit
    if (node.get("spec") or {}).get("unschedulable"):
        fit.layer, fit.code, fit.text = (
            Layer.SCHEDULING,
            "scheduling.cordoned",
            f"node {name} is cordoned",
        )
        return fit
    if _short(health.allocatable_all, requests, usage):
        _insufficient(fit, health, requests, usage)
    return fit


def _insufficient(
    fit: NodeFit, health: NodeHealth, requests: Mapping[str, int], usage: NodeUsage | None
) -> None:
    fit.layer, fit.code = Layer.SCHEDULING, "scheduling.insufficient"
    fit.lazy = lambda: _shortfall_text(health.name, health.allocatable_all, requests, usage)


def _short(alloc: Mapping[str, int], requests: Mapping[str, int], usage: NodeUsage | None) -> bool:
    used = usage.requests if usage else {}
    for res, want in requests.items():
        if res in alloc and want > alloc[res] - used.get(res, 0):
            return True
    pods = alloc.get("pods")
    return pods is not None and usage is not None and len(usage.pods) >= pods


def _shortfall_text(
    name: str, alloc: Mapping[str, int], requests: Mapping[str, int], usage: NodeUsage | None
) -> tuple[str, list[str]]:
    text = f"node {name}: " + "; ".join(_shortfall(alloc, requests, usage))
    workloads = [p for p in (usage.pods if usage else []) if not p.startswith(SYSTEM_NAMESPACES)]
    if not workloads:
        return text, []
    more = f" and {len(workloads) - 8} more" if len(workloads) > 8 else ""
    return text, [f"node {name} runs: " + ", ".join(workloads[:8]) + more]


def _plugin_block(
    health: NodeHealth, requests: Mapping[str, int], usage: NodeUsage | None
) -> tuple[str, str, list[str]] | None:
    used = usage.requests if usage else {}
    if health.plugin.code in ("device-plugin.mig-config-failed", "device-plugin.mig-reconfiguring"):
        return health.plugin.code, health.plugin.text, list(health.plugin.detail)
    for res, want in requests.items():
        if not res.startswith("nvidia.com/"):
            continue
        alloc = health.allocatable.get(res, 0)
        if alloc > 0:
            cap = health.capacity.get(res, alloc)
            if cap == alloc or alloc - used.get(res, 0) >= want:
                continue  # the common case, kept cheap: it runs for every candidate node
            free = alloc - used.get(res, 0)
            if free < want <= cap - used.get(res, 0):
                return (
                    "device-plugin.unhealthy-devices",
                    f"node {health.name}: {res} allocatable {alloc} < capacity {cap} "
                    f"({cap - alloc} unhealthy), {used.get(res, 0)} in use, pod needs {want}",
                    [],
                )
            continue
        offered = {
            k: v for k, v in health.allocatable.items() if v > 0 and not k.startswith(MIG_PREFIX)
        }
        if offered and not res.startswith(MIG_PREFIX) and health.plugin.ok:
            names = ", ".join(f"{k}: {v}" for k, v in sorted(offered.items()))
            return (
                "device-plugin.resource-renamed",
                f"node {health.name} advertises {names} but not {res} (GPU sharing renames the resource)",
                [],
            )
        # The node offers none of the resource.
        if res == GPU and health.mig_resources:
            mig = ", ".join(f"{k}: {v}" for k, v in sorted(health.mig_resources.items()))
            return (
                "device-plugin.mig-only",
                f"node {health.name} exposes only MIG slices ({mig}), not {GPU}",
                [],
            )
        if not health.plugin.ok:
            return health.plugin.code, health.plugin.text, list(health.plugin.detail)
        if res.startswith(MIG_PREFIX):
            layout = (
                ", ".join(f"{k}: {v}" for k, v in sorted(health.mig_resources.items()))
                or "no MIG slices"
            )
            return (
                "device-plugin.mig-profile-missing",
                f"node {health.name} is not partitioned into {res} (it offers {layout})",
                [],
            )
        return "device-plugin.no-gpu-resource", f"node {health.name} advertises no {res}", []
    # A failing plugin pod on a node that still advertises its GPUs is a side note here.
    return None


def _shortfall(
    alloc: Mapping[str, int], requests: Mapping[str, int], usage: NodeUsage | None
) -> list[str]:
    used = usage.requests if usage else {}
    out = []
    for res, want in sorted(
        requests.items(), key=lambda kv: (not kv[0].startswith("nvidia"), kv[0])
    ):
        if res not in alloc:
            continue
        free = alloc[res] - used.get(res, 0)
        if want > free:
            out.append(
                f"{fmt_amount(res, used.get(res, 0))}/{fmt_amount(res, alloc[res])} {res} allocated, "
                f"{fmt_amount(res, max(free, 0))} free, pod requests {fmt_amount(res, want)}"
            )
    pods_alloc = alloc.get("pods")
    if pods_alloc is not None and usage is not None and len(usage.pods) >= pods_alloc:
        out.append(f"pod limit reached ({len(usage.pods)}/{pods_alloc} pods)")
    return out
