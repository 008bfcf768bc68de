"""NodeName: a pod bound to a node by `spec.nodeName` can use that node alone."""

from __future__ import annotations

from collections.abc import Mapping

from triage.cluster.objects import Obj
from triage.layers.node import NodeHealth
from triage.layers.scheduling.framework import Exclusion, FilterPlugin, Phase


def exclude(
    pod: Obj, node: Obj, health: NodeHealth, requests: Mapping[str, int], gpu: bool
) -> Exclusion | None:
    bound = (pod.get("spec") or {}).get("nodeName")
    if bound and bound != health.name:
        return Exclusion("other node", lambda: f"pod is bound to node {bound}")
    return None


PLUGIN = FilterPlugin(
    name="NodeName",
    phase=Phase.BEFORE_FIT,
    category="node name",
    scheduler_says=("didn't match the requested node name",),
    pod_fields=("spec.nodeName",),
    applies=lambda pod: bool((pod.get("spec") or {}).get("nodeName")),
    exclude=exclude,
)
