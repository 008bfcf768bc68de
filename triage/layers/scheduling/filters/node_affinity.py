"""NodeAffinity: the pod's nodeSelector and required node affinity against the node's labels,
minding the labels GPU feature discovery writes: a node that only lacks those, where GFD is
down or its driver is, is one the pod could use (the missing labels are the device-plugin
layer's matter there)."""

from __future__ import annotations

from collections.abc import Mapping

from triage.cluster.objects import Obj, labels
from triage.cluster.selectors import (
    node_selector_term_matches,
    required_affinity_terms,
    selector_mismatch,
)
from triage.layers.node import NodeHealth
from triage.layers.scheduling.framework import Exclusion, FilterPlugin, Phase
from triage.vendors import VENDORS
from triage.vendors.nvidia import PRODUCT

MISMATCH = "selector mismatch"
FEATURE_PREFIXES = tuple(v.feature_prefix for v in VENDORS)  # labels feature discovery writes


def exclude(
    pod: Obj, node: Obj, health: NodeHealth, requests: Mapping[str, int], gpu: bool
) -> Exclusion | None:
    fits = _labels_fit(pod, node, health)
    if fits is None:
        return Exclusion(MISMATCH, lambda: _selector_text(pod, node, health.name))
    return Exclusion("", None, gfd_missing=True) if fits == "gfd-missing" else None


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
        k.startswith(FEATURE_PREFIXES) and k not in node_labels for k in bad
    )
    return "gfd-missing" if gfd_only and (not health.driver.ok or health.gfd_down) else None


def _selector_text(pod: Obj, node: Obj, name: str) -> str:
    missing = ", ".join(selector_mismatch(pod, node))
    product = labels(node).get(PRODUCT) or ""
    extra = f" [node product {product}]" if product and "gpu.product" not in missing else ""
    if "gpu.product" in missing and "-MIG-" in product:
        extra += " (MIG single strategy: the product label carries the MIG profile)"
    elif "gpu.product" in missing and product.endswith("-SHARED"):
        extra += " (GPU sharing: the product label gains -SHARED)"
    return f"node {name}: nodeSelector/affinity {missing}{extra}"


PLUGIN = FilterPlugin(
    name="NodeAffinity",
    phase=Phase.BEFORE_FIT,
    category="selector",
    scheduler_says=("didn't match Pod's node affinity/selector",),
    pod_fields=("spec.nodeSelector", "spec.affinity.nodeAffinity"),
    applies=lambda pod: bool(
        (pod.get("spec") or {}).get("nodeSelector") or required_affinity_terms(pod)
    ),
    exclude=exclude,
    exclusion_codes={MISMATCH: "scheduling.selector-mismatch"},
)
