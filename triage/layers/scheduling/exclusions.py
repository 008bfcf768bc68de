"""Could the pod *ever* use this node? nodeName, nodeSelector and required node affinity (minding
labels that GPU feature discovery has not written yet), untolerated taints, GPU presence, MIG
profiles the node can never offer, DRA-only GPUs, and nodes too small for the request. A node
that fails here is not a candidate, and its problems are side findings."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from triage.cluster.objects import Obj, labels
from triage.cluster.quantities import GPU, MIG_PREFIX, fmt_amount
from triage.cluster.selectors import (
    node_selector_term_matches,
    required_affinity_terms,
    selector_mismatch,
    taint_str,
    untolerated_taints,
)
from triage.layers.node import NodeHealth, expected_gpu_count

# Taints that reflect node health or cordoning: judged as such, not as a pod/taint mismatch.
HEALTH_TAINTS = (
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
    "node.kubernetes.io/unschedulable",
)


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


def static_exclusion(
    pod: Obj, node: Obj, health: NodeHealth, requests: Mapping[str, int], gpu: bool
) -> tuple[str, Why | None, bool] | None:
    """(category, lazy explanation, GFD labels missing) or None when the node is a candidate.

    Runs for every node on every triage, so the texts are only built when shown.
    """
    name = health.name
    bound = (pod.get("spec") or {}).get("nodeName")
    if bound and bound != name:
        return "other node", lambda: f"pod is bound to node {bound}", False
    if gpu and not health.gpu_node:
        return "no GPU", lambda: f"node {name} has no NVIDIA GPU", False
    labels_fit = _labels_fit(pod, node, health)
    if labels_fit is None:
        return "selector mismatch", lambda: _selector_text(pod, node, name), False
    gfd_missing = labels_fit == "gfd-missing"
    taints = untolerated_taints(pod, node, ignore=HEALTH_TAINTS)
    if taints:
        text = ", ".join(taint_str(t) for t in taints)
        return (
            f"untolerated taint {taints[0].get('key')}",
            lambda: f"node {name}: untolerated taint {text}",
            False,
        )
    size = _size_exclusion(node, health, requests)
    if size is not None:
        return (*size, False)
    return None if not gfd_missing else ("", None, True)


def _labels_fit(pod: Obj, node: Obj, health: NodeHealth) -> str | None:
    """Whether the node's labels satisfy the pod's nodeSelector and required node affinity:
    "fits", "gfd-missing" (only labels that GPU feature discovery has not written yet are
    missing, and it is down there), or None (a mismatch)."""
    spec = pod.get("spec") or {}
    selector = spec.get("nodeSelector") or {}
    terms = required_affinity_terms(pod) if spec.get("affinity") else None
    if not selector and terms is None:
        return "fits"
    node_labels = labels(node)
    bad = [k for k, v in selector.items() if node_labels.get(k) != v]
    affinity_fails = terms is not None and not any(
        node_selector_term_matches(t, node) for t in terms
    )
    if not bad and not affinity_fails:
        return "fits"
    # Labels that GPU feature discovery writes vanish when the driver is down, and are never
    # written where GFD is off or failing: a node that only lacks such labels is one the pod
    # could use.
    gfd_only = not affinity_fails and all(
        k.startswith("nvidia.com/") and k not in node_labels for k in bad
    )
    return "gfd-missing" if gfd_only and (not health.driver.ok or health.gfd_down) else None


def _size_exclusion(
    node: Obj, health: NodeHealth, requests: Mapping[str, int]
) -> tuple[str, Why] | None:
    """A request the node can never meet: a MIG profile it cannot offer, GPUs it offers only
    through DRA, more devices or more CPU/memory than it has in all."""
    name = health.name
    alloc_all = health.allocatable_all
    for res, want in requests.items():
        if res.startswith(MIG_PREFIX):
            why = _mig_unfit(node, health, res)
            if why is not None:
                return "no such MIG profile", lambda w=why: w
        elif res == GPU and health.dra_only and not health.capacity.get(GPU):
            return (
                "GPUs only through DRA",
                lambda: (
                    f"node {name} offers its GPUs only through DRA ResourceClaims (a DRA "
                    f"kubelet plugin and no device plugin), not as {GPU}"
                ),
            )
        if res.startswith("nvidia.com/"):
            expected = expected_gpu_count(node, health, res)
            if expected is not None and want > expected:
                return (
                    "too small",
                    lambda r=res, w=want, e=expected: (
                        f"node {name}: offers at most {e} {r}, pod requests {w}"
                    ),
                )
        elif res in alloc_all and want > alloc_all[res]:
            text = (
                f"node {name}: allocatable {res} {fmt_amount(res, alloc_all[res])} "
                f"< requested {fmt_amount(res, want)}"
            )
            return "too small", lambda t=text: t
    return None


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
