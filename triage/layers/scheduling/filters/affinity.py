"""InterPodAffinity: the pod's required pod affinity (no matching pod in the node's topology
domain, unless it is the first of its group) and anti-affinity (a matching pod already
there), and running pods' required anti-affinity that keeps this pod out.
"""

from __future__ import annotations

from collections import defaultdict

from triage.cluster.lazy import cached_property
from triage.cluster.objects import Obj, labels, ns_of
from triage.cluster.selectors import label_selector_matches, selector_str
from triage.layers.scheduling.filters.view import FilterView, Refusal, with_keys
from triage.layers.scheduling.framework import FilterPlugin, Phase
from triage.signals import Signal


def required_terms(pod: Obj, kind: str) -> list[Obj]:
    aff = ((pod.get("spec") or {}).get("affinity") or {}).get(kind) or {}
    return list(aff.get("requiredDuringSchedulingIgnoredDuringExecution") or [])


class InterPodAffinity:
    def __init__(self, view: FilterView, *, existing: bool) -> None:
        self.view = view
        self.affinity = required_terms(view.pod, "podAffinity")
        self.anti_affinity = required_terms(view.pod, "podAntiAffinity")
        self.check_existing = existing

    def pre_filter(self) -> list[Signal]:
        return []

    @cached_property
    def _affinity_domains(self) -> list[tuple[str, Obj, Obj | None, dict[str, list[Obj]]]]:
        """Per required pod (anti-)affinity term of the incoming pod: (kind, term, selector,
        matching running pods per topology value)."""
        pod_labels = labels(self.view.pod)
        out = []
        for kind, terms in (("affinity", self.affinity), ("anti", self.anti_affinity)):
            for term in terms:
                key = str(term.get("topologyKey") or "")
                sel = with_keys(
                    term.get("labelSelector"), term.get("matchLabelKeys") or [], pod_labels
                )
                found: dict[str, list[Obj]] = defaultdict(list)
                for p in self.view.bound_pods(self.view.term_namespaces(term, self.view.namespace)):
                    value = self.view.domain(str(p["spec"]["nodeName"]), key)
                    if value is not None and label_selector_matches(sel, labels(p)):
                        found[value].append(p)
                out.append((kind, term, sel, dict(found)))
        return out

    @cached_property
    def _first_of_group(self) -> bool:
        """No pod matches the affinity terms anywhere and the pod matches them itself: the
        scheduler lets the first pod of a group go anywhere."""
        terms = [
            (t, sel, found) for kind, t, sel, found in self._affinity_domains if kind == "affinity"
        ]
        return all(not found for _, _, found in terms) and all(
            label_selector_matches(sel, labels(self.view.pod))
            and _covers(self.view.term_namespaces(t, self.view.namespace), self.view.namespace)
            for t, sel, _ in terms
        )

    def filter(self, node: str, obj: Obj) -> Refusal | None:
        if self.affinity or self.anti_affinity:
            for kind, term, sel, found in self._affinity_domains:
                key = str(term.get("topologyKey") or "")
                value = labels(obj).get(key)
                values = {"key": key, "selector": selector_str(sel)}
                if (
                    kind == "affinity"
                    and not self._first_of_group
                    and (value is None or value not in found)
                ):
                    return Refusal(
                        "scheduling.pod-affinity",
                        f"node {node}: no pod matching {selector_str(sel)} runs in its {key}"
                        f" ({value or 'node lacks the label'})",
                        values,
                    )
                if kind == "anti" and value is not None and found.get(value):
                    who = [self.view.who(p) for p in found[value]]
                    return Refusal(
                        "scheduling.pod-anti-affinity",
                        f"node {node}: {key}={value} already runs {who[0][0]}"
                        + (f" and {len(who) - 1} more" if len(who) > 1 else "")
                        + f" matching {selector_str(sel)}",
                        values,
                        tuple(f"node {node}: anti-affinity match {d}" for _, d in who if d),
                    )
        if self.check_existing:
            return self._existing_anti_affinity(node, obj)
        return None

    @cached_property
    def _forbidden(self) -> list[tuple[str, str, Obj]]:
        """(topology key, value, pod) where a running pod's required anti-affinity matches
        the incoming pod."""
        pod_labels, out = labels(self.view.pod), []
        for p in self.view.bound_pods(None):
            for term in required_terms(p, "podAntiAffinity"):
                if not _covers(self.view.term_namespaces(term, ns_of(p)), self.view.namespace):
                    continue
                sel = with_keys(
                    term.get("labelSelector"), term.get("matchLabelKeys") or [], labels(p)
                )
                key = str(term.get("topologyKey") or "")
                value = self.view.domain(str(p["spec"]["nodeName"]), key)
                if value is not None and label_selector_matches(sel, pod_labels):
                    out.append((key, value, p))
        return out

    def _existing_anti_affinity(self, node: str, obj: Obj) -> Refusal | None:
        node_labels = labels(obj)
        for key, value, p in self._forbidden:
            if node_labels.get(key) == value:
                who, detail = self.view.who(p)
                return Refusal(
                    "scheduling.existing-anti-affinity",
                    f"node {node}: {who} in its {key} ({value}) keeps pods like this one out "
                    "(that pod's required anti-affinity)",
                    {"key": key},
                    (f"node {node}: anti-affinity of {detail}",) if detail else (),
                )
        return None


def _covers(namespaces: set[str] | None, namespace: str) -> bool:
    """Whether a term's namespaces (None: all) include `namespace`."""
    return namespaces is None or namespace in namespaces


PLUGIN = FilterPlugin(
    name="InterPodAffinity",
    phase=Phase.AFTER_FIT,
    category="pod affinity",
    reasons={
        "scheduling.pod-affinity": "none of the {n} node(s) with room for the pod shares a "
        "{key} with a pod matching its required pod affinity ({selector})",
        "scheduling.pod-anti-affinity": "the {n} node(s) with room for the pod share a {key} "
        "with pods its required anti-affinity excludes ({selector})",
        "scheduling.existing-anti-affinity": "the {n} node(s) with room for the pod are in a "
        "{key} where running pods' required anti-affinity keeps pods like it out",
    },
    scheduler_says=(
        "didn't match pod anti-affinity rules", "didn't match pod affinity rules",
        "didn't satisfy existing pods anti-affinity rules",
    ),
    pod_fields=(
        "spec.affinity.podAffinity", "spec.affinity.podAntiAffinity", "metadata.labels",
        "metadata.namespace",
    ),
    applies=lambda pod: bool(
        required_terms(pod, "podAffinity") or required_terms(pod, "podAntiAffinity")
    ),
    make=lambda view: InterPodAffinity(view, existing=view.existing_anti_affinity),
)  # fmt: skip
