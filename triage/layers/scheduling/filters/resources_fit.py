"""NodeResourcesFit: the node's size, and its free resources now.

Whether the pod could ever fit: a MIG profile the node can never offer, GPUs it offers only
through DRA, more devices or more CPU or memory than it has in all (then it is no candidate).
Whether it fits now: the requests of the pods bound to the node against its allocatable,
resource by resource, and its pod slots.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from triage.cluster.objects import Obj, labels
from triage.cluster.quantities import GPU, MIG_PREFIX, fmt_amount
from triage.cluster.usage import NodeUsage
from triage.layers.node import NodeHealth, expected_gpu_count
from triage.layers.scheduling.framework import Exclusion, FilterPlugin, Phase
from triage.vendors import is_accelerator
from triage.vendors.nvidia import MEMORY, MIG_CAPABLE, MIG_CONFIG, MIG_STRATEGY, PRODUCT

INSUFFICIENT = "scheduling.insufficient"
TOO_SMALL, MIG, DRA_ONLY = "too small", "no such MIG profile", "GPUs only through DRA"
NOT_OFFERED = "resource not offered"

# Pods of these namespaces are infrastructure, not the tenants competing for a node.
SYSTEM_NAMESPACES = (
    "kube-system/",
    "gpu-operator/",
    "kube-flannel/",
    "calico-system/",
    "monitoring/",
)


def exclude(
    pod: Obj, node: Obj, health: NodeHealth, requests: Mapping[str, int], gpu: bool
) -> Exclusion | None:
    """A request the node can never meet: a MIG profile it cannot offer, GPUs it offers only
    through DRA, more devices or more CPU/memory than it has in all."""
    name = health.name
    alloc_all = health.allocatable_all
    for res, want in requests.items():
        if res.startswith(MIG_PREFIX):
            unfit = _mig_unfit(node, health, res)
            if unfit is not None:
                return Exclusion(MIG, _said(unfit))
        elif res == GPU and health.dra_only and not health.capacity.get(GPU):
            return Exclusion(
                DRA_ONLY,
                lambda: (
                    f"node {name} offers its GPUs only through DRA ResourceClaims (a DRA "
                    f"kubelet plugin and no device plugin), not as {GPU}"
                ),
            )
        if is_accelerator(res):
            expected = expected_gpu_count(node, health, res)
            if expected is not None and want > expected:
                most = f"node {name}: offers at most {expected} {res}, pod requests {want}"
                return Exclusion(TOO_SMALL, _said(most))
        elif res not in alloc_all and res != "pods":
            # kube-scheduler counts a resource the node does not list as none of it: an
            # extended resource (RDMA, SR-IOV, another vendor's device) no plugin advertises
            # there, or storage the node does not report
            return Exclusion(NOT_OFFERED, _said(f"node {name} offers no {res}"))
        elif want > alloc_all[res]:
            text = (
                f"node {name}: allocatable {res} {fmt_amount(res, alloc_all[res])} "
                f"< requested {fmt_amount(res, want)}"
            )
            return Exclusion(TOO_SMALL, _said(text))
    return None


def _said(text: str) -> Callable[[], str]:
    return lambda: text


def _mig_unfit(node: Obj, health: NodeHealth, res: str) -> str | None:
    """Why the node can never offer the MIG profile `res` as it is set up, or None when it
    offers it or could after a repartition (then its layout is the device plugin's matter)."""
    if res in health.capacity or res in health.allocatable:
        return None
    lab = labels(node)
    name, profile = health.name, res.removeprefix(MIG_PREFIX)
    if lab.get(MIG_CAPABLE) == "false":
        return f"node {name}: its GPUs are not MIG-capable ({MIG_CAPABLE}=false)"
    if lab.get(MIG_CONFIG) == "all-disabled":
        return f"node {name}: MIG is turned off there ({MIG_CONFIG}=all-disabled)"
    if lab.get(MIG_STRATEGY) == "single":
        product = lab.get(PRODUCT, "?")
        return (
            f"node {name}: MIG single strategy advertises its slices as {GPU} (product "
            f"{product}), never as {res}"
        )
    configured = lab.get(MIG_CONFIG) not in (None, "all-disabled")
    if lab.get(MIG_CAPABLE) != "true" and not health.mig_resources and not configured:
        return f"node {name} has no MIG-capable GPUs"
    want_gb, memory = _profile_gb(profile), lab.get(MEMORY, "")
    if want_gb is not None and memory.isdigit() and want_gb * 1000 > int(memory) * 1.1:
        return f"node {name}: its GPUs have {int(memory) // 1024} GiB, less than profile {profile}"
    return None


def _profile_gb(profile: str) -> int | None:
    """The memory of a MIG profile such as 3g.40gb (40), or None if it is not of that form."""
    head, _, size = profile.partition(".")
    digits = size.removesuffix("gb").split("+")[0]
    return int(digits) if head.endswith("g") and digits.isdigit() else None


def shortfall_text(
    name: str, alloc: Mapping[str, int], requests: Mapping[str, int], usage: NodeUsage | None
) -> tuple[str, list[str]]:
    text = f"node {name}: " + "; ".join(_shortfall(alloc, requests, usage))
    workloads = [p for p in (usage.pods if usage else []) if not p.startswith(SYSTEM_NAMESPACES)]
    if not workloads:
        return text, []
    more = f" and {len(workloads) - 8} more" if len(workloads) > 8 else ""
    return text, [f"node {name} runs: " + ", ".join(workloads[:8]) + more]


def _shortfall(
    alloc: Mapping[str, int], requests: Mapping[str, int], usage: NodeUsage | None
) -> list[str]:
    used = usage.requests if usage else {}
    out = []
    for res, want in sorted(requests.items(), key=lambda kv: (not is_accelerator(kv[0]), kv[0])):
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


PLUGIN = FilterPlugin(
    name="NodeResourcesFit",
    phase=Phase.FIT,
    category="insufficient",
    reasons={INSUFFICIENT: "{n} of {c} node(s) the pod can use are short of free resources"},
    scheduler_says=("Insufficient ", "Too many pods"),
    pod_fields=(
        "spec.containers[].resources", "spec.initContainers[].resources",
        "spec.initContainers[].restartPolicy", "spec.overhead",
    ),
    exclude=exclude,
    exclusion_codes={
        TOO_SMALL: "scheduling.request-too-large",
        MIG: "scheduling.no-mig-profile",
        DRA_ONLY: "scheduling.gpus-only-through-dra",
        NOT_OFFERED: "scheduling.resource-not-offered",
    },
)  # fmt: skip
