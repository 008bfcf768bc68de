"""Where could this pod run? Evaluates every node against the pod as the scheduler would.

Two questions per node, kept apart on purpose (the root-cause rule needs both):
1. Is the node one the pod could *ever* use? (nodeName, nodeSelector, required affinity,
   untolerated taints, GPU presence, size.) If not, its problems are side findings.
2. If so, what stops the pod there *now*, at the lowest layer: node down or driver broken,
   GPUs not advertised, cordoned or short of free resources.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from triage.cluster.objects import Obj
from triage.cluster.quantities import GPU, wants_gpu
from triage.cluster.selectors import required_affinity_terms
from triage.cluster.usage import NodeUsage
from triage.layers.node import NodeHealth
from triage.layers.scheduling.blocks import NodeFit, dynamic, insufficient, refused
from triage.layers.scheduling.dra import NO_DRA, DraCheck
from triage.layers.scheduling.exclusions import static_exclusion
from triage.layers.scheduling.pod_filters import PodFilters
from triage.signals import Signal
from triage.vendors import is_accelerator


def class_key(node: Obj, health: NodeHealth, keys: tuple[str, ...]) -> object:
    """What decides whether a pod could ever use a node: its health's signature (interned:
    equal ones are one object, so its id names the class, and the class holds the signature,
    so the id is not reused meanwhile) and the values of the labels `keys` (those the pod's
    selectors name)."""
    if not keys:
        return id(health.signature)
    labels = node["metadata"].get("labels") or {}
    return (id(health.signature), *map(labels.get, keys))


class NodeClass:
    """The verdict for one node class (equal signature and selector labels): whether the pod
    could ever use such a node, and where its nodes go."""

    __slots__ = (
        "category",
        "excluded",
        "fast",
        "gfd_missing",
        "limits",
        "max_pods",
        "side",
        "signature",
    )

    def __init__(self, signature: object) -> None:
        self.signature = signature
        self.excluded: list[tuple[Obj, NodeHealth]] | None = None  # where excluded nodes go
        self.side = False  # excluded GPU nodes with a broken driver or plugin: side findings
        self.category = ""
        self.gfd_missing = False
        self.fast = False  # a clean node of this class needs only the free-resources check
        # (resource, requested, allocatable) for the fast check; requests beyond allocatable
        # are already excluded as "too small".
        self.limits: tuple[tuple[str, int, int], ...] = ()
        self.max_pods: int | None = None  # allocatable pods

    def short(self, usage: NodeUsage | None) -> bool:
        """Whether a node of this class lacks the free resources the pod requests."""
        if usage is None:
            return any(want > alloc for _, want, alloc in self.limits)
        used = usage.requests
        for res, want, alloc in self.limits:
            if want > alloc - used.get(res, 0):
                return True
        return self.max_pods is not None and len(usage.pods) >= self.max_pods


@dataclass
class Derived:
    """What is worked out from an evaluation alone, once, for every triage that shares it
    (pods of one shape in a sweep): `reasons` and `no_candidate` fill it."""

    short_names: list[str] | None = None  # the nodes short of free resources, by name
    node_signals: list[Signal] | None = None  # the signals the evaluation decides alone
    sized: list[int] = field(default_factory=list)  # ... those about the pod's size, by index
    lowest_blocking: int | None = None  # the index of the lowest blocking one among them
    sides: tuple[int, int] = (0, 0)  # where the side findings among them start and end
    # (id of one of them, what a pod asks) -> (it, it with that line): `reasons._with_asks`
    asked: dict[tuple[int, str], tuple[Signal, Signal]] = field(default_factory=dict)
    digest: tuple[object, ...] | None = None  # what verdicts take from it (`evaluation_digest`)
    # the pod's nodeSelector pairs that no node carries, per selector
    unmatched: dict[tuple[tuple[str, str], ...], list[str]] = field(default_factory=dict)

    def at(self, index: int, *, sides: bool) -> int:
        """Where the signal at `index` of `node_signals` is in the list handed out, with or
        without the side findings (never one of them: they neither block nor state a size)."""
        start, end = self.sides
        return index if sides or index < start else index - (end - start)


class Evaluation:
    """Every node judged for one pod, sorted into what the report needs, in node order."""

    def __init__(self, requests: Mapping[str, int]) -> None:
        self.requests = requests
        self.total = 0
        self.candidates = 0  # nodes the pod could use
        self.usable: list[str] = []  # ... and can use now
        self.blocked: list[NodeFit] = []  # ... blocked at some layer, except by free resources
        self.short: list[NodeHealth] = []  # ... short of free resources
        self.short_usage: list[NodeUsage | None] = []  # ... and their usage, in that order
        self.joining: list[NodeFit] = []  # ... GPUs expected within minutes
        self.contradictions: list[NodeHealth] = []  # candidates whose validator disagrees
        # (category, is a GPU node) -> nodes the pod could never use, in order of first sight
        self.excluded: dict[tuple[str, bool], list[tuple[Obj, NodeHealth]]] = {}
        self.side: list[tuple[str, NodeHealth]] = []  # broken GPU nodes among the excluded
        # Answers derived from this evaluation alone, kept for the triages that share it.
        self.derived = Derived()
        # One node per class when the nodes were judged by class (`node_groups`): they carry
        # every value the cluster's nodes have for the labels the pod's selectors name.
        self.representatives: list[Obj] | None = None
        # (category, one member's health) per excluded node class, when judged by class:
        # members of a class list the same resources
        self.excluded_classes: list[tuple[str, NodeHealth]] | None = None

    def short_names(self) -> list[str]:
        names = self.derived.short_names
        if names is None:
            names = self.derived.short_names = [h.name for h in self.short]
        return names

    def short_fits(self, count: int) -> list[NodeFit]:
        """The first `count` nodes short of free resources, as fits that can describe it."""
        out = []
        for health, usage in zip(self.short[:count], self.short_usage[:count], strict=True):
            fit = NodeFit(health.name)
            insufficient(fit, health, self.requests, usage)
            out.append(fit)
        return out


class Placement:
    """Evaluates every node for one pod. Whether a node could ever take the pod depends only on
    its signature and the labels the pod's selectors mention, so each node class is judged
    once and the per-node work is left to the nodes that pass (5,000 nodes, one triage)."""

    def __init__(
        self,
        *,
        pod: Obj,
        requests: Mapping[str, int],
        dra: DraCheck | None = None,
        only_nodes: set[str] | None = None,
        filters: PodFilters | None = None,
    ) -> None:
        self.pod, self.requests, self.dra = pod, requests, dra
        self.filters = filters  # ports, volumes, spread, pod affinity: None when none apply
        self.only_nodes = only_nodes  # DRA: nodes publishing devices for the pod's claims
        self.gpu = wants_gpu(pod, requests)
        self.gpu_resources = tuple(filter(is_accelerator, requests))
        spec = pod.get("spec") or {}
        terms = required_affinity_terms(pod) or []
        self.per_node = bool(spec.get("nodeName")) or any(t.get("matchFields") for t in terms)
        keys = list((spec.get("nodeSelector") or {}).keys())
        keys += [e.get("key", "") for t in terms for e in t.get("matchExpressions") or []]
        self.keys = tuple(dict.fromkeys(keys))

    def evaluate(
        self,
        nodes: list[Obj],
        healths: list[NodeHealth],
        usage: Mapping[str, NodeUsage],
    ) -> Evaluation:
        """Judge `nodes` (with their health, same order) against the pod, node by node, as the
        scheduler's filter pass does: could the pod ever use the node (`classify`, once per
        node class), and what stops it there now (`candidate`). The reference evaluator:
        `by_class.evaluate` gives the same answer faster where it may."""
        out = Evaluation(self.requests)
        out.total = len(nodes)
        classes: dict[object, NodeClass] = {}
        keys, only = self.keys, self.only_nodes
        usage_of = usage.get
        # The hot loop: one pass over every node of the cluster on every triage.
        for node, health in zip(nodes, healths, strict=True):
            name = health.name
            if only is not None and name not in only:
                out.excluded.setdefault((NO_DRA, health.gpu_node), []).append((node, health))
                if health.gpu_node and not (health.driver.ok and health.plugin.ok):
                    out.side.append((NO_DRA, health))
                continue
            if self.per_node:
                klass = self.classify(node, health, out)
            else:
                key = class_key(node, health, keys)
                klass = classes.get(key) or classes.setdefault(
                    key, self.classify(node, health, out)
                )
            excluded = klass.excluded
            if excluded is not None:
                excluded.append((node, health))
                if klass.side:
                    out.side.append((klass.category, health))
                continue
            self.candidate(out, klass, node, health, usage_of(name))
        return out

    def candidate(
        self,
        out: Evaluation,
        klass: NodeClass,
        node: Obj,
        health: NodeHealth,
        use: NodeUsage | None,
    ) -> None:
        """A node the pod could use (of class `klass`): is it usable now, short of free
        resources, or blocked at some layer? The scheduler's filter pass for one node."""
        name = health.name
        out.candidates += 1
        if health.contradiction:
            out.contradictions.append(health)
        # The common case on a big cluster is a healthy node that offers what the pod asks
        # for (klass.fast and health.clean): only its free resources matter.
        if not (klass.fast and health.clean):
            fit = NodeFit(name)
            fit.gfd_labels_missing = klass.gfd_missing
            dynamic(
                fit,
                node=node,
                health=health,
                requests=self.requests,
                usage=use,
                dra=self.dra,
                gpu=self.gpu,
            )
            if fit.joining is not None:
                out.joining.append(fit)
                return
            if fit.layer is not None:
                out.blocked.append(fit)
                return
        filters = self.filters
        refusal = filters.before_fit(name) if filters is not None else None
        if refusal is None and klass.short(use):
            out.short.append(health)
            out.short_usage.append(use)
            return
        if refusal is None and filters is not None:
            refusal = filters.after_fit(name)
        if refusal is not None:
            out.blocked.append(refused(name, refusal))
        else:
            out.usable.append(name)

    def classify(self, node: Obj, health: NodeHealth, out: Evaluation) -> NodeClass:
        """Whether the pod could ever use a node like this one (the same signature and
        selected labels): the excluded list its nodes go to, or what decides on each."""
        klass = NodeClass(health.signature)
        excl = static_exclusion(self.pod, node, health, self.requests, self.gpu)
        if excl is not None and excl[0]:
            klass.category = excl[0]
            klass.excluded = out.excluded.setdefault((excl[0], health.gpu_node), [])
            klass.side = health.gpu_node and not (health.driver.ok and health.plugin.ok)
            return klass
        klass.gfd_missing = excl is not None and excl[2]
        alloc = health.allocatable_all
        klass.fast = (
            self.dra is None
            and not klass.gfd_missing
            and all(alloc.get(res) for res in self.gpu_resources)
        )
        klass.max_pods = alloc.get("pods")
        klass.limits = tuple(
            (res, want, alloc[res])
            for res, want in sorted(self.requests.items(), key=lambda kv: kv[0] != GPU)
            if res in alloc
        )
        return klass

    def exclusion_text(self, category: str, node: Obj, health: NodeHealth) -> str:
        """Why the pod could never use `node` (one line, for the examples in a report)."""
        excl = static_exclusion(self.pod, node, health, self.requests, self.gpu)
        if category == NO_DRA or excl is None or excl[1] is None:
            return f"node {health.name} publishes no devices for the pod's ResourceClaims"
        return excl[1]()
