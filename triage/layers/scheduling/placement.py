"""Where could this pod run? Evaluates every node against the pod as the scheduler would.

Two questions per node, kept apart on purpose (the root-cause rule needs both):
1. Is the node one the pod could *ever* use? (nodeName, nodeSelector, required affinity,
   untolerated taints, GPU presence, size.) If not, its problems are side findings.
2. If so, what stops the pod there *now*, at the lowest layer: node down or driver broken,
   GPUs not advertised, cordoned or short of free resources.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import chain
from typing import TypeVar

from triage.cluster.memo import IdentityMemo
from triage.cluster.objects import Obj
from triage.cluster.quantities import GPU
from triage.cluster.selectors import required_affinity_terms
from triage.cluster.usage import NodeUsage
from triage.layers.node import NodeHealth
from triage.layers.scheduling.blocks import NodeFit, dynamic, insufficient, refused
from triage.layers.scheduling.dra import DraCheck
from triage.layers.scheduling.exclusions import NO_DRA, static_exclusion, wants_gpu
from triage.layers.scheduling.filters import PodFilters


class _Class:
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


class NodeGroup:
    """The nodes of one class in a node list: its first node and health, and every member's
    position and (node, health), in node order."""

    __slots__ = ("health", "idx", "node", "pairs")

    def __init__(self, node: Obj, health: NodeHealth) -> None:
        self.node, self.health = node, health
        self.idx: list[int] = []
        self.pairs: list[tuple[Obj, NodeHealth]] = []


def class_key(node: Obj, health: NodeHealth, keys: tuple[str, ...]) -> object:
    """What decides whether a pod could ever use a node: its health's signature (interned:
    equal ones are one object, so its id names the class, and the class holds the signature,
    so the id is not reused meanwhile) and the values of the labels `keys` (those the pod's
    selectors name)."""
    if not keys:
        return id(health.signature)
    labels = node["metadata"].get("labels") or {}
    return (id(health.signature), *map(labels.get, keys))


def node_groups(
    nodes: list[Obj], healths: list[NodeHealth], keys: tuple[str, ...]
) -> list[NodeGroup]:
    """`nodes` grouped by `class_key`, the groups in order of first sight."""
    found: dict[object, NodeGroup] = {}
    for i, (node, health) in enumerate(zip(nodes, healths, strict=True)):
        key = class_key(node, health, keys)
        group = found.get(key)
        if group is None:
            group = found[key] = NodeGroup(node, health)
        group.idx.append(i)
        group.pairs.append((node, health))
    return list(found.values())


T = TypeVar("T")


def _in_node_order(parts: list[tuple[list[int], list[T]]]) -> list[T]:
    """The items of several groups, merged back into node order by their positions. (The
    positions are distinct, so sorting the pairs never compares two items.)"""
    if len(parts) == 1:
        return parts[0][1]
    merged = sorted(chain.from_iterable(zip(idx, items, strict=True) for idx, items in parts))
    return [item for _, item in merged]


class Evaluation:
    """Every node judged for one pod, sorted into what the report needs, in node order."""

    def __init__(self, requests: Mapping[str, int]) -> None:
        self.requests = requests
        self.total = 0
        self.candidates = 0  # nodes the pod could use
        self.usable: list[str] = []  # ... and can use now
        self.blocked: list[NodeFit] = []  # ... blocked at some layer, except by free resources
        self.short: list[tuple[NodeHealth, NodeUsage | None]] = []  # ... short of free resources
        self.joining: list[NodeFit] = []  # ... GPUs expected within minutes
        self.contradictions: list[NodeHealth] = []  # candidates whose validator disagrees
        # (category, is a GPU node) -> nodes the pod could never use, in order of first sight
        self.excluded: dict[tuple[str, bool], list[tuple[Obj, NodeHealth]]] = {}
        self.side: list[tuple[str, NodeHealth]] = []  # broken GPU nodes among the excluded
        # Answers derived from this evaluation alone, kept for the triages that share it.
        self.derived: dict[object, object] = {}
        # One node per class when the nodes were judged by class (`node_groups`): they carry
        # every value the cluster's nodes have for the labels the pod's selectors name.
        self.representatives: list[Obj] | None = None

    def short_names(self) -> list[str]:
        names = self.derived.get("short-names")
        if names is None:
            names = self.derived["short-names"] = [h.name for h, _ in self.short]
        return names  # type: ignore[return-value]

    def short_fits(self, count: int) -> list[NodeFit]:
        """The first `count` nodes short of free resources, as fits that can describe it."""
        out = []
        for health, usage in self.short[:count]:
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
        self.gpu_resources = tuple(r for r in requests if r.startswith("nvidia.com/"))
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
        *,
        memo: IdentityMemo | None = None,
    ) -> Evaluation:
        """Judge `nodes` (with their health, same order) against the pod. With `memo`, the
        nodes' grouping into classes is remembered for as long as the nodes and their health
        are the same objects, and only the nodes of classes the pod could use are visited."""
        if memo is not None and self.only_nodes is None and not self.per_node:
            keys = self.keys
            groups = memo.get(
                ("node-groups", keys), (*nodes, *healths), lambda: node_groups(nodes, healths, keys)
            )
            return self._evaluate_groups(groups, len(nodes), usage)
        out = Evaluation(self.requests)
        out.total = len(nodes)
        classes: dict[object, _Class] = {}
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
                klass = self._classify(node, health, out)
            else:
                key = class_key(node, health, keys)
                klass = classes.get(key) or classes.setdefault(
                    key, self._classify(node, health, out)
                )
            excluded = klass.excluded
            if excluded is not None:
                excluded.append((node, health))
                if klass.side:
                    out.side.append((klass.category, health))
                continue
            self._candidate(out, klass, node, health, usage_of(name))
        return out

    def _evaluate_groups(
        self, groups: list[NodeGroup], total: int, usage: Mapping[str, NodeUsage]
    ) -> Evaluation:
        """`evaluate` over nodes grouped by class: a class the pod could never use sends its
        nodes to their list at once; the other classes' nodes are judged one by one. Every
        list comes out in node order, as `evaluate`'s loop makes it."""
        out = Evaluation(self.requests)
        out.total = total
        out.representatives = [g.node for g in groups]
        into: dict[int, tuple[list[tuple[Obj, NodeHealth]], list[NodeGroup]]] = {}
        side: list[tuple[str, NodeGroup]] = []
        candidates: list[tuple[_Class, NodeGroup]] = []
        for group in groups:  # in order of first sight, as the classes are made in the loop
            klass = self._classify(group.node, group.health, out)
            if klass.excluded is None:
                candidates.append((klass, group))
                continue
            into.setdefault(id(klass.excluded), (klass.excluded, []))[1].append(group)
            if klass.side:
                side.append((klass.category, group))
        for excluded, parts in into.values():
            excluded.extend(_in_node_order([(g.idx, g.pairs) for g in parts]))
        out.side.extend(
            _in_node_order([(g.idx, [(cat, h) for _, h in g.pairs]) for cat, g in side])
        )
        usage_of, usable, short = usage.get, out.usable, out.short
        judged = [(g.idx, [(klass, pair) for pair in g.pairs]) for klass, g in candidates]
        plain = self.filters is None
        fast = 0
        for klass, (node, health) in _in_node_order(judged):
            if plain and klass.fast and health.clean and not health.contradiction:
                # `_candidate`'s common case, inline: only the free resources matter.
                fast += 1
                use = usage_of(health.name)
                if klass.short(use):
                    short.append((health, use))
                else:
                    usable.append(health.name)
                continue
            self._candidate(out, klass, node, health, usage_of(health.name))
        out.candidates += fast
        return out

    def _candidate(
        self, out: Evaluation, klass: _Class, node: Obj, health: NodeHealth, use: NodeUsage | None
    ) -> None:
        """A node the pod could use: is it usable now, short of free resources, or blocked?"""
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
            out.short.append((health, use))
            return
        if refusal is None and filters is not None:
            refusal = filters.after_fit(name)
        if refusal is not None:
            out.blocked.append(refused(name, refusal))
        else:
            out.usable.append(name)

    def _classify(self, node: Obj, health: NodeHealth, out: Evaluation) -> _Class:
        klass = _Class(health.signature)
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
