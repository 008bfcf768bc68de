"""Where could this pod run? Evaluates every node against the pod as the scheduler would.

Two questions per node, kept apart on purpose (the root-cause rule needs both):
1. Is the node one the pod could *ever* use? (nodeName, nodeSelector, required affinity,
   untolerated taints, GPU presence, size.) If not, its problems are side findings.
2. If so, what stops the pod there *now*, at the lowest layer: node down or driver broken,
   GPUs not advertised, cordoned or short of free resources.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from triage.kubeobj import (
    GPU,
    MIG_PREFIX,
    fmt_amount,
    labels,
    name_of,
    resources,
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


@dataclass
class NodeFit:
    node: str
    exclusion: str | None = None  # category when the pod could never use the node
    exclusion_text: str = ""
    layer: Layer | None = None  # lowest layer blocking the pod here now; None = usable
    code: str = ""
    text: str = ""
    detail: list[str] = field(default_factory=list)
    gfd_labels_missing: bool = False
    joining: str | None = None  # set when the node will likely be usable within minutes

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


def _static_exclusion(
    pod: Obj, node: Obj, health: NodeHealth, requests: Mapping[str, int]
) -> tuple[str, str, bool] | None:
    spec = pod.get("spec") or {}
    name = name_of(node)
    gpu = wants_gpu(pod, requests)
    if spec.get("nodeName") and spec["nodeName"] != name:
        return "other node", f"pod is bound to node {spec['nodeName']}", False
    if gpu and not health.gpu_node:
        return "no GPU", f"node {name} has no NVIDIA GPU", False
    mismatch = selector_mismatch(pod, node)
    gfd_missing = False
    if mismatch:
        # Labels that GPU feature discovery writes vanish when the driver is down: a node that
        # only lacks those labels and has a broken driver is still one the pod could use.
        node_labels = labels(node)
        gfd_only = all(
            m.endswith("(node lacks label)") and m.startswith("nvidia.com/") for m in mismatch
        )
        if not (gfd_only and not health.driver.ok):
            missing = ", ".join(m for m in mismatch)
            product = node_labels.get("nvidia.com/gpu.product") or ""
            extra = f" [node product {product}]" if product and "gpu.product" not in missing else ""
            if "gpu.product" in missing and "-MIG-" in product:
                extra += " (MIG single strategy: the product label carries the MIG profile)"
            elif "gpu.product" in missing and product.endswith("-SHARED"):
                extra += " (GPU sharing: the product label gains -SHARED)"
            return (
                "selector mismatch",
                f"node {name}: nodeSelector/affinity {missing}{extra}",
                False,
            )
        gfd_missing = True
    taints = untolerated_taints(pod, node, ignore=HEALTH_TAINTS)
    if taints:
        text = ", ".join(taint_str(t) for t in taints)
        return (
            f"untolerated taint {taints[0].get('key')}",
            f"node {name}: untolerated taint {text}",
            False,
        )
    alloc_all = resources((node.get("status") or {}).get("allocatable"))
    for res, want in requests.items():
        if res.startswith("nvidia.com/"):
            expected = expected_gpu_count(node, health, res)
            if expected is not None and want > expected:
                return (
                    "too small",
                    f"node {name}: offers at most {expected} {res}, pod requests {want}",
                    False,
                )
        elif res in alloc_all and want > alloc_all[res]:
            return (
                "too small",
                f"node {name}: allocatable {res} {fmt_amount(res, alloc_all[res])} "
                f"< requested {fmt_amount(res, want)}",
                False,
            )
    return None if not gfd_missing else ("", "", True)


DraCheck = Callable[[str], "tuple[Layer, str, str] | None"]


def evaluate_node(
    *,
    pod: Obj,
    node: Obj,
    health: NodeHealth,
    requests: Mapping[str, int],
    usage: NodeUsage | None,
    dra: DraCheck | None = None,
) -> NodeFit:
    name = name_of(node)
    fit = NodeFit(node=name)
    excl = _static_exclusion(pod, node, health, requests)
    if excl is not None:
        category, text, gfd_missing = excl
        if category:
            fit.exclusion, fit.exclusion_text = category, text
            return fit
        fit.gfd_labels_missing = gfd_missing
    gpu = wants_gpu(pod, requests)
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
    short = _shortfall(node, requests, usage)
    if short:
        fit.layer, fit.code = Layer.SCHEDULING, "scheduling.insufficient"
        fit.text = f"node {name}: " + "; ".join(short)
        workloads = [
            p for p in (usage.pods if usage else []) if not p.startswith(SYSTEM_NAMESPACES)
        ]
        if workloads:
            more = f" and {len(workloads) - 8} more" if len(workloads) > 8 else ""
            fit.detail = [f"node {name} runs: " + ", ".join(workloads[:8]) + more]
    return fit


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
        offered = {
            k: v for k, v in health.allocatable.items() if v > 0 and not k.startswith(MIG_PREFIX)
        }
        if alloc == 0 and offered and not res.startswith(MIG_PREFIX) and health.plugin.ok:
            names = ", ".join(f"{k}: {v}" for k, v in sorted(offered.items()))
            return (
                "device-plugin.resource-renamed",
                f"node {health.name} advertises {names} but not {res} (GPU sharing renames the resource)",
                [],
            )
        if alloc == 0:
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
        cap = health.capacity.get(res, alloc)
        free = alloc - used.get(res, 0)
        if alloc < cap and free < want <= cap - used.get(res, 0):
            return (
                "device-plugin.unhealthy-devices",
                f"node {health.name}: {res} allocatable {alloc} < capacity {cap} "
                f"({cap - alloc} unhealthy), {used.get(res, 0)} in use, pod needs {want}",
                [],
            )
    if not health.plugin.ok and health.plugin.code == "device-plugin.pod-failing":
        return None  # GPUs still advertised: a failing plugin pod is a side note here
    return None


def _shortfall(node: Obj, requests: Mapping[str, int], usage: NodeUsage | None) -> list[str]:
    alloc = resources((node.get("status") or {}).get("allocatable"))
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
