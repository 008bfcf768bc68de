"""PodTopologySpread: a DoNotSchedule constraint whose skew the node would push past maxSkew,
or a node without the constraint's topology label."""

from __future__ import annotations

from triage.cluster.lazy import cached_property
from triage.cluster.objects import Obj, labels
from triage.cluster.selectors import label_selector_matches, selector_mismatch, selector_str
from triage.layers.scheduling.filters.view import FilterView, Refusal, with_keys
from triage.layers.scheduling.framework import FilterPlugin, Phase
from triage.signals import Signal


def hard_constraints(pod: Obj) -> list[Obj]:
    return [
        c
        for c in (pod.get("spec") or {}).get("topologySpreadConstraints") or []
        if c.get("whenUnsatisfiable", "DoNotSchedule") == "DoNotSchedule" and c.get("topologyKey")
    ]


class TopologySpread:
    def __init__(self, view: FilterView) -> None:
        self.view = view
        self.spread = hard_constraints(view.pod)

    def pre_filter(self) -> list[Signal]:
        return []

    @cached_property
    def _spread_counts(self) -> list[tuple[Obj, Obj | None, dict[str, int], bool]]:
        """Per DoNotSchedule constraint: (constraint, selector, matching pods per domain,
        whether the incoming pod counts itself)."""
        pod_labels = labels(self.view.pod)
        keys = [str(c["topologyKey"]) for c in self.spread]
        eligible = {
            name
            for name, n in self.view.nodes.items()
            # nodeAffinityPolicy Honor (the default): only nodes the pod's selector and
            # required node affinity accept count as domains.
            if all(k in labels(n) for k in keys) and not selector_mismatch(self.view.pod, n)
        }
        pods = self.view.bound_pods({self.view.namespace})
        out = []
        for c in self.spread:
            key = str(c["topologyKey"])
            sel = with_keys(c.get("labelSelector"), c.get("matchLabelKeys") or [], pod_labels)
            counts = {labels(self.view.nodes[n])[key]: 0 for n in eligible}
            for p in pods:
                where = str((p.get("spec") or {}).get("nodeName"))
                if where in eligible and label_selector_matches(sel, labels(p)):
                    counts[labels(self.view.nodes[where])[key]] += 1
            out.append((c, sel, counts, label_selector_matches(sel, pod_labels)))
        return out

    def filter(self, node: str, obj: Obj) -> Refusal | None:
        for c, sel, counts, self_match in self._spread_counts if self.spread else ():
            key, skew_max = str(c["topologyKey"]), int(c.get("maxSkew") or 1)
            value = labels(obj).get(key)
            base = {"key": key, "max_skew": str(skew_max), "selector": selector_str(sel)}
            if value is None:
                return Refusal(
                    "scheduling.topology-spread-label",
                    f"node {node} lacks label {key}, which the pod's topology spread needs",
                    base,
                )
            low = min(counts.values(), default=0)
            if len(counts) < int(c.get("minDomains") or 0):
                low = 0
            skew = counts.get(value, 0) + int(self_match) - low
            if skew > skew_max:
                emptiest = min(counts, key=lambda d: (counts[d], d)) if counts else "?"
                return Refusal(
                    "scheduling.topology-spread",
                    f"node {node}: {key}={value} holds {counts.get(value, 0)} pod(s) matching "
                    f"{selector_str(sel)}, {emptiest} holds {low}: skew {skew} > maxSkew {skew_max}",
                    {**base, "emptiest": emptiest, "fewest": str(low)},
                )
        return None


PLUGIN = FilterPlugin(
    name="PodTopologySpread",
    phase=Phase.AFTER_FIT,
    category="topology spread",
    reasons={
        "scheduling.topology-spread": "the pod's topology spread on {key} (maxSkew "
        "{max_skew}) rules out the {n} node(s) with room for it: their domains already hold "
        "the most pods matching {selector} ({emptiest} holds {fewest})",
        "scheduling.topology-spread-label": "{n} of {c} node(s) with room for the pod lack "
        "the label {key} its topology spread needs",
    },
    scheduler_says=("didn't match pod topology spread constraints", "missing required label"),
    pod_fields=("spec.topologySpreadConstraints", "metadata.labels", "metadata.namespace"),
    applies=lambda pod: bool(hard_constraints(pod)),
    make=TopologySpread,
)  # fmt: skip
