"""TaintToleration: a node with a NoSchedule or NoExecute taint the pod does not tolerate.

Taints that say the node is down or cordoned are judged as what they mean (the driver layer's
NotReady, a cordon), not as a mismatch between the pod and the node."""

from __future__ import annotations

from collections.abc import Mapping

from triage.cluster.objects import Obj
from triage.cluster.selectors import taint_str, untolerated_taints
from triage.layers.node import NodeHealth
from triage.layers.scheduling.framework import Exclusion, FilterPlugin, Phase

HEALTH_TAINTS = (
    "node.kubernetes.io/not-ready",
    "node.kubernetes.io/unreachable",
    "node.kubernetes.io/unschedulable",
)


def exclude(
    pod: Obj, node: Obj, health: NodeHealth, requests: Mapping[str, int], gpu: bool
) -> Exclusion | None:
    taints = untolerated_taints(pod, node, ignore=HEALTH_TAINTS)
    if not taints:
        return None
    text = ", ".join(taint_str(t) for t in taints)
    return Exclusion(
        f"untolerated taint {taints[0].get('key')}",
        lambda: f"node {health.name}: untolerated taint {text}",
    )


PLUGIN = FilterPlugin(
    name="TaintToleration",
    phase=Phase.BEFORE_FIT,
    category="taint",
    scheduler_says=("untolerated taint",),
    pod_fields=("spec.tolerations",),
    exclude=exclude,
    exclusion_codes={"untolerated taint": "scheduling.untolerated-taint"},
)
