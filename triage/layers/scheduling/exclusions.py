"""Could the pod *ever* use this node? The registry's exclusions in its order (nodeName, GPU
presence, nodeSelector and required node affinity minding labels that GPU feature discovery
has not written yet, untolerated taints, then the node's size: MIG profiles it can never
offer, DRA-only GPUs, too few devices, CPU or memory). A node that fails here is not a
candidate, and its problems are side findings."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from triage.cluster.objects import Obj
from triage.layers.node import NodeHealth
from triage.layers.scheduling.registry import EXCLUDERS

Why = Callable[[], str]


def static_exclusion(
    pod: Obj, node: Obj, health: NodeHealth, requests: Mapping[str, int], gpu: bool
) -> tuple[str, Why | None, bool] | None:
    """(category, lazy explanation, GFD labels missing) or None when the node is a candidate:
    the registry's exclusions in order, the first that excludes naming the category.

    Runs for every node class on every triage, so the texts are only built when shown.
    """
    gfd_missing = False
    for exclude in EXCLUDERS:
        found = exclude(pod, node, health, requests, gpu)
        if found is None:
            continue
        if found.category:
            return found.category, found.why, False
        gfd_missing = gfd_missing or found.gfd_missing
    return ("", None, True) if gfd_missing else None
