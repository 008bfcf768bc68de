"""What every filter plugin shares: the pod, the nodes by name, the pods bound to each node,
and reads of the objects the filters look at (PersistentVolumeClaims, pods, namespaces).

A filter plugin judges one concern for one pod, as a kube-scheduler plugin does: `pre_filter`
returns the reasons that hold on every node, `filter` why one node is rejected (the first
failing filter, in the scheduler's order, is the node's reason).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from triage.cluster.events import Event
from triage.cluster.lazy import cached_property
from triage.cluster.objects import Obj, labels, name_of, ns_of
from triage.cluster.selectors import label_selector_matches
from triage.cluster.usage import NodeUsage
from triage.signals import Signal

Get = Callable[[str, str, "str | None"], "Obj | None"]
Read = Callable[[str, "str | None"], list[Obj]]
ReadPods = Callable[["str | None"], list[Obj]]
Events = Callable[[str, str], list[Event]]


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why one filter rejects one node: the signal code, a line about the node, and the
    placeholders the layer's headline for that code fills."""

    code: str
    text: str
    values: Mapping[str, str] = field(default_factory=dict)
    detail: tuple[str, ...] = ()


def pods_on(node: str, usage: Mapping[str, NodeUsage], get: Get) -> list[Obj]:
    """The objects of the pods bound to `node` (by the usage index), those that still exist."""
    use = usage.get(node)
    found = (
        get("Pod", name, ns)
        for ns, _, name in (r.partition("/") for r in (use.pods if use else ()))
    )
    return [p for p in found if p is not None]


def with_keys(selector: Obj | None, keys: list[str], pod_labels: dict[str, str]) -> Obj | None:
    """A term's selector with its matchLabelKeys merged in from the incoming pod's labels."""
    if selector is None or not keys:
        return selector
    extra = {k: pod_labels[k] for k in keys if k in pod_labels}
    return {**selector, "matchLabels": {**(selector.get("matchLabels") or {}), **extra}}


class Filter(Protocol):
    def pre_filter(self) -> list[Signal]:
        """Reasons that stop the pod on every node, whatever the node."""
        ...

    def filter(self, node: str, obj: Obj) -> Refusal | None:
        """Why this filter rejects the node, or None."""
        ...


class FilterView:
    """One pod and one view of the cluster, read once and shared by the filters."""

    def __init__(
        self,
        pod: Obj,
        *,
        get: Get,
        read: Read,
        events: Events,
        nodes: list[Obj],
        usage: Mapping[str, NodeUsage],
        active_pods: ReadPods,
        existing_anti_affinity: bool = False,
    ) -> None:
        """`active_pods`: the active pods (`pod_active`) of a namespace (None: of every one),
        in the order `read` lists them (`triage.cluster.indexes.active_pods`)."""
        self.pod, self.get, self.read, self.events = pod, get, read, events
        self.active_pods = active_pods
        # whether the scheduler reports running pods' anti-affinity (InterPodAffinity then
        # scans every running pod for it)
        self.existing_anti_affinity = existing_anti_affinity
        self.namespace = ns_of(pod)
        self.nodes = {name_of(n): n for n in nodes}
        self.usage = usage

    def pods_on(self, node: str) -> list[Obj]:
        return pods_on(node, self.usage, self.get)

    @cached_property
    def _namespaces(self) -> dict[str, dict[str, str]]:
        return {name_of(n): labels(n) for n in self.read("Namespace", None)}

    def term_namespaces(self, term: Obj, home: str) -> set[str] | None:
        """The namespaces a pod-affinity term looks in (None: all of them)."""
        names = set(term.get("namespaces") or [])
        sel = term.get("namespaceSelector")
        if sel is not None:
            if not sel.get("matchLabels") and not sel.get("matchExpressions"):
                return None
            names |= {n for n, lab in self._namespaces.items() if label_selector_matches(sel, lab)}
        return names if names or sel is not None else {home}

    def bound_pods(self, namespaces: set[str] | None) -> list[Obj]:
        pods = (
            self.active_pods(None)
            if namespaces is None
            else [p for ns in sorted(namespaces) for p in self.active_pods(ns)]
        )
        return [p for p in pods if (p.get("spec") or {}).get("nodeName")]

    def domain(self, node: str, key: str) -> str | None:
        n = self.nodes.get(node)
        return labels(n).get(key) if n is not None else None

    def who(self, pod: Obj) -> tuple[str, str]:
        """(tenant-safe text, operator detail) naming a pod the asker may not see."""
        ref = f"{ns_of(pod)}/{name_of(pod)}"
        if ns_of(pod) == self.namespace:
            return ref, ""
        return "a pod in another namespace", ref
