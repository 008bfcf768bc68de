"""NodeUnschedulable: a cordoned node (`spec.unschedulable`) takes no new pod."""

from __future__ import annotations

from triage.cluster.objects import Obj
from triage.layers.scheduling.framework import FilterPlugin, Phase

CORDONED = "scheduling.cordoned"


def cordoned(node: Obj) -> bool:
    return bool((node.get("spec") or {}).get("unschedulable"))


PLUGIN = FilterPlugin(
    name="NodeUnschedulable",
    phase=Phase.BEFORE_FIT,
    category="cordoned",
    reasons={CORDONED: "{n} of {c} node(s) the pod can use are cordoned"},
    scheduler_says=("were unschedulable",),
)
