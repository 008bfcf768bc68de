"""Where could this pod run? Evaluates every node against the pod as the scheduler would.

Two questions per node, kept apart on purpose (the root-cause rule needs both):
1. Is the node one the pod could *ever* use? (nodeName, nodeSelector, required affinity,
   untolerated taints, GPU presence, size.) If not, its problems are side findings.
2. If so, what stops the pod there *now*, at the lowest layer: node down or driver broken,
   GPUs not advertised, cordoned or short of free resources.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType

from triage.cluster.objects import Obj, labels
from triage.cluster.quantities import GPU, MIG_PREFIX, fmt_amount
from triage.cluster.selectors import (
    node_selector_term_matches,
    required_affinity_terms,
    selector_mismatch,
    taint_str,
    untolerated_taints,
)
from triage.cluster.usage import NodeUsage
from triage.layers.node import NodeHealth, expected_gpu_count
from triage.layers.scheduling.dra import DraCheck
from triage.layers.scheduling.filters import PodFilters, Refusal
from triage.layers.verdicts import Verdict
from triage.model import Layer

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
            # Labels that GPU feature discovery writes vanish when the driver is down, and are
            # never written where GFD is off or failing: a node that only lacks such labels is
            # one the pod could use.
            gfd_only = not affinity_fails and all(
                k.startswith("nvidia.com/") and k not in node_labels for k in bad
            )
            if not (gfd_only and (not health.driver.ok or health.gfd_down)):
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
        if res.startswith(MIG_PREFIX):
            why = _mig_unfit(node, health, res)
            if why is not None:
                return "no such MIG profile", lambda w=why: w, False
        elif res == GPU and health.dra_only and not health.capacity.get(GPU):
            return (
                "GPUs only through DRA",
                lambda: (
                    f"node {name} offers its GPUs only through DRA ResourceClaims (a DRA "
                    f"kubelet plugin and no device plugin), not as {GPU}"
                ),
                False,
            )
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


def _mig_unfit(node: Obj, health: NodeHealth, res: str) -> str | None:
    """Why the node can never offer the MIG profile `res` as it is set up, or None when it
    offers it or could after a repartition (then its layout is the device plugin's matter)."""
    if res in health.capacity or res in health.allocatable:
        return None
    lab = labels(node)
    name, profile = health.name, res.removeprefix(MIG_PREFIX)
    if lab.get("nvidia.com/mig.capable") == "false":
        return f"node {name}: its GPUs are not MIG-capable (nvidia.com/mig.capable=false)"
    if lab.get("nvidia.com/mig.config") == "all-disabled":
        return f"node {name}: MIG is turned off there (nvidia.com/mig.config=all-disabled)"
    if lab.get("nvidia.com/mig.strategy") == "single":
        product = lab.get("nvidia.com/gpu.product", "?")
        return (
            f"node {name}: MIG single strategy advertises its slices as {GPU} (product "
            f"{product}), never as {res}"
        )
    configured = lab.get("nvidia.com/mig.config") not in (None, "all-disabled")
    if lab.get("nvidia.com/mig.capable") != "true" and not health.mig_resources and not configured:
        return f"node {name} has no MIG-capable GPUs"
    want_gb, memory = _profile_gb(profile), lab.get("nvidia.com/gpu.memory", "")
    if want_gb is not None and memory.isdigit() and want_gb * 1000 > int(memory) * 1.1:
        return f"node {name}: its GPUs have {int(memory) // 1024} GiB, less than profile {profile}"
    return None


def _profile_gb(profile: str) -> int | None:
    """The memory of a MIG profile such as 3g.40gb (40), or None if it is not of that form."""
    head, _, size = profile.partition(".")
    digits = size.removesuffix("gb").split("+")[0]
    return int(digits) if head.endswith("g") and digits.isdigit() else None


NO_DRA = "no DRA devices"  # the exclusion of nodes publishing nothing the pod's claims match


class _Class:
    """The verdict for one node class (equal signature and selector labels): whether the pod
    could ever use such a node, and where its nodes go."""

    __slots__ = (
        "category",
        "excluded",
        "fast",
        "gfd_missing",
        "limits",
        "max_pods",
        "side",
        "signature",
    )

    def __init__(self, signature: object) -> None:
        self.signature = signature
        self.excluded: list[tuple[Obj, NodeHealth]] | None = None  # where excluded nodes go
        self.side = False  # excluded GPU nodes with a broken driver or plugin: side findings
        self.category = ""
        self.gfd_missing = False
        self.fast = False  # a clean node of this class needs only the free-resources check
        # (resource, requested, allocatable) for the fast check; requests beyond allocatable
        # are already excluded as "too small".
        self.limits: tuple[tuple[str, int, int], ...] = ()
        self.max_pods: int | None = None  # allocatable pods

    def short(self, usage: NodeUsage | None) -> bool:
        """Whether a node of this class lacks the free resources the pod requests."""
        if usage is None:
            return any(want > alloc for _, want, alloc in self.limits)
        used = usage.requests
        for res, want, alloc in self.limits:
            if want > alloc - used.get(res, 0):
                return True
        return self.max_pods is not None and len(usage.pods) >= self.max_pods


class Evaluation:
    """Every node judged for one pod, sorted into what the report needs, in node order."""

    def __init__(self, requests: Mapping[str, int]) -> None:
        self.requests = requests
        self.total = 0
        self.candidates = 0  # nodes the pod could use
        self.usable: list[str] = []  # ... and can use now
        self.blocked: list[NodeFit] = []  # ... blocked at some layer, except by free resources
        self.short: list[tuple[NodeHealth, NodeUsage | None]] = []  # ... short of free resources
        self.joining: list[NodeFit] = []  # ... GPUs expected within minutes
        self.contradictions: list[NodeHealth] = []  # candidates whose validator disagrees
        # (category, is a GPU node) -> nodes the pod could never use, in order of first sight
        self.excluded: dict[tuple[str, bool], list[tuple[Obj, NodeHealth]]] = {}
        self.side: list[tuple[str, NodeHealth]] = []  # broken GPU nodes among the excluded

    def short_fits(self, count: int) -> list[NodeFit]:
        """The first `count` nodes short of free resources, as fits that can describe it."""
        out = []
        for health, usage in self.short[:count]:
            fit = NodeFit(health.name)
            _insufficient(fit, health, self.requests, usage)
            out.append(fit)
        return out


class Placement:
    """Evaluates every node for one pod. Whether a node could ever take the pod depends only on
    its signature and the labels the pod's selectors mention, so each node class is judged
    once and the per-node work is left to the nodes that pass (5,000 nodes, one triage)."""

    def __init__(
        self,
        *,
        pod: Obj,
        requests: Mapping[str, int],
        dra: DraCheck | None = None,
        only_nodes: set[str] | None = None,
        filters: PodFilters | None = None,
    ) -> None:
        self.pod, self.requests, self.dra = pod, requests, dra
        self.filters = filters  # ports, volumes, spread, pod affinity: None when none apply
        self.only_nodes = only_nodes  # DRA: nodes publishing devices for the pod's claims
        self.gpu = wants_gpu(pod, requests)
        self.gpu_resources = tuple(r for r in requests if r.startswith("nvidia.com/"))
        spec = pod.get("spec") or {}
        terms = required_affinity_terms(pod) or []
        self.per_node = bool(spec.get("nodeName")) or any(t.get("matchFields") for t in terms)
        keys = list((spec.get("nodeSelector") or {}).keys())
        keys += [e.get("key", "") for t in terms for e in t.get("matchExpressions") or []]
        self.keys = tuple(dict.fromkeys(keys))

    def evaluate(
        self, nodes: list[Obj], healths: list[NodeHealth], usage: Mapping[str, NodeUsage]
    ) -> Evaluation:
        """Judge `nodes` (with their health, same order) against the pod."""
        out = Evaluation(self.requests)
        out.total = len(nodes)
        classes: dict[object, _Class] = {}
        keys, only, dra, filters = self.keys, self.only_nodes, self.dra, self.filters
        usable, short, usage_of = out.usable, out.short, usage.get
        # The hot loop: one pass over every node of the cluster on every triage.
        for node, health in zip(nodes, healths, strict=True):
            name = health.name
            if only is not None and name not in only:
                out.excluded.setdefault((NO_DRA, health.gpu_node), []).append((node, health))
                if health.gpu_node and not (health.driver.ok and health.plugin.ok):
                    out.side.append((NO_DRA, health))
                continue
            if self.per_node:
                klass = self._classify(node, health, out)
            else:
                # Interned signatures: equal ones are one object, so its id names the class
                # (the class holds the signature, so the id is not reused meanwhile).
                key: object = id(health.signature)
                if keys:
                    node_labels = node["metadata"].get("labels") or {}
                    key = (key, *map(node_labels.get, keys))
                klass = classes.get(key) or classes.setdefault(
                    key, self._classify(node, health, out)
                )
            excluded = klass.excluded
            if excluded is not None:
                excluded.append((node, health))
                if klass.side:
                    out.side.append((klass.category, health))
                continue
            out.candidates += 1
            if health.contradiction:
                out.contradictions.append(health)
            use = usage_of(name)
            # The common case on a big cluster is a healthy node that offers what the pod asks
            # for (klass.fast and health.clean): only its free resources matter.
            if not (klass.fast and health.clean):
                fit = NodeFit(name)
                fit.gfd_labels_missing = klass.gfd_missing
                _dynamic(
                    fit,
                    node=node,
                    health=health,
                    requests=self.requests,
                    usage=use,
                    dra=dra,
                    gpu=self.gpu,
                )
                if fit.joining is not None:
                    out.joining.append(fit)
                    continue
                if fit.layer is not None:
                    out.blocked.append(fit)
                    continue
            refusal = filters.before_fit(name) if filters is not None else None
            if refusal is None and klass.short(use):
                short.append((health, use))
                continue
            if refusal is None and filters is not None:
                refusal = filters.after_fit(name)
            if refusal is not None:
                out.blocked.append(_refused(name, refusal))
            else:
                usable.append(name)
        return out

    def _classify(self, node: Obj, health: NodeHealth, out: Evaluation) -> _Class:
        klass = _Class(health.signature)
        excl = _static_exclusion(self.pod, node, health, self.requests, self.gpu)
        if excl is not None and excl[0]:
            klass.category = excl[0]
            klass.excluded = out.excluded.setdefault((excl[0], health.gpu_node), [])
            klass.side = health.gpu_node and not (health.driver.ok and health.plugin.ok)
            return klass
        klass.gfd_missing = excl is not None and excl[2]
        alloc = health.allocatable_all
        klass.fast = (
            self.dra is None
            and not klass.gfd_missing
            and all(alloc.get(res) for res in self.gpu_resources)
        )
        klass.max_pods = alloc.get("pods")
        klass.limits = tuple(
            (res, want, alloc[res])
            for res, want in sorted(self.requests.items(), key=lambda kv: kv[0] != GPU)
            if res in alloc
        )
        return klass

    def exclusion_text(self, category: str, node: Obj, health: NodeHealth) -> str:
        """Why the pod could never use `node` (one line, for the examples in a report)."""
        excl = _static_exclusion(self.pod, node, health, self.requests, self.gpu)
        if category == NO_DRA or excl is None or excl[1] is None:
            return f"node {health.name} publishes no devices for the pod's ResourceClaims"
        return excl[1]()


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
    if (node.get("spec") or {}).get("unschedulable"):
        fit.layer, fit.code, fit.text = (
            Layer.SCHEDULING,
            "scheduling.cordoned",
            f"node {name} is cordoned",
        )
    return fit


def _refused(node: str, refusal: Refusal) -> NodeFit:
    fit = NodeFit(node)
    fit.layer, fit.code, fit.text = Layer.SCHEDULING, refusal.code, refusal.text
    fit.detail, fit.values = refusal.detail, refusal.values
    return fit


def _blocked_by(fit: NodeFit, layer: Layer, verdict: Verdict) -> None:
    fit.layer, fit.code, fit.text = layer, verdict.code, verdict.text
    fit.detail, fit.pod, fit.values = list(verdict.detail), verdict.pod, verdict.values


def _insufficient(
    fit: NodeFit, health: NodeHealth, requests: Mapping[str, int], usage: NodeUsage | None
) -> None:
    fit.layer, fit.code = Layer.SCHEDULING, "scheduling.insufficient"
    fit.lazy = lambda: _shortfall_text(health.name, health.allocatable_all, requests, usage)


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
) -> tuple[Layer, Verdict] | None:
    """What stops the pod's NVIDIA requests on the node, below scheduling: the device plugin
    (or, for a failed MIG reconfiguration, the operator's MIG manager, routed as the driver)."""
    used = usage.requests if usage else {}
    if health.plugin.code == "device-plugin.mig-reconfiguring":
        return Layer.DEVICE_PLUGIN, health.plugin
    name = health.name
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
                return Layer.DEVICE_PLUGIN, Verdict(
                    False,
                    "device-plugin.unhealthy-devices",
                    f"node {name}: {res} allocatable {alloc} < capacity {cap} "
                    f"({cap - alloc} unhealthy), {used.get(res, 0)} in use, pod needs {want}",
                )
            continue
        if health.mig_failed is not None:
            return Layer.DRIVER, health.mig_failed
        offered = {
            k: v for k, v in health.allocatable.items() if v > 0 and not k.startswith(MIG_PREFIX)
        }
        if offered and not res.startswith(MIG_PREFIX) and health.plugin.ok:
            names = ", ".join(f"{k}: {v}" for k, v in sorted(offered.items()))
            return Layer.DEVICE_PLUGIN, Verdict(
                False,
                "device-plugin.resource-renamed",
                f"node {name} advertises {names} but not {res} (GPU sharing renames the resource)",
            )
        # The node offers none of the resource.
        if res == GPU and health.mig_resources:
            mig = ", ".join(f"{k}: {v}" for k, v in sorted(health.mig_resources.items()))
            return Layer.DEVICE_PLUGIN, Verdict(
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
            return Layer.DEVICE_PLUGIN, Verdict(
                False,
                "device-plugin.mig-profile-missing",
                f"node {name} is not partitioned into {res} (it offers {layout})",
            )
        return Layer.DEVICE_PLUGIN, Verdict(
            False, "device-plugin.no-gpu-resource", f"node {name} advertises no {res}"
        )
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
