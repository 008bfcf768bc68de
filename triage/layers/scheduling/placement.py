"""Where could this pod run? Evaluates every node against the pod as the scheduler would.

Two questions per node, kept apart on purpose (the root-cause rule needs both):
1. Is the node one the pod could *ever* use? (nodeName, nodeSelector, required affinity,
   untolerated taints, GPU presence, size.) If not, its problems are side findings.
2. If so, what stops the pod there *now*, at the lowest layer: node down or driver broken,
   GPUs not advertised, cordoned or short of free resources.
"""

from __future__ import annotations

from bisect import bisect
from collections.abc import Callable, Hashable, Mapping
from copy import copy
from itertools import chain, compress
from operator import is_not, itemgetter, not_
from typing import TypeVar

from triage.cluster.memo import IdentityMemo, Recent
from triage.cluster.objects import Obj
from triage.cluster.quantities import GPU
from triage.cluster.selectors import required_affinity_terms
from triage.cluster.usage import NodeUsage, UsageMark, UsageSnapshot
from triage.layers.node import NodeHealth
from triage.layers.scheduling.blocks import NodeFit, dynamic, insufficient, refused
from triage.layers.scheduling.dra import DraCheck
from triage.layers.scheduling.exclusions import NO_DRA, static_exclusion, wants_gpu
from triage.layers.scheduling.filters import PodFilters

T = TypeVar("T")
ExcludedLists = dict[tuple[str, bool], list[tuple[Obj, NodeHealth]]]


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


class NodeGroups:
    """A node list grouped by class (`node_groups`), and what evaluations over it remember
    while it lives (it lives while the nodes and their health are the same objects): where
    excluded nodes go, and the layout of candidate nodes, per way of classifying the groups.
    Nothing kept is ever mutated; an entry is replaced whole, so concurrent triages may share
    it."""

    __slots__ = ("groups", "kept")

    def __init__(self, groups: list[NodeGroup]) -> None:
        self.groups = groups
        self.kept: Recent[Hashable, object] = Recent(64)

    def remember(self, key: Hashable, make: Callable[[], T]) -> T:
        found = self.kept.get(key)
        if found is None:
            found = make()
            self.kept.put(key, found)
        return found  # type: ignore[return-value]


class _Layout:
    """The candidate nodes of one way of classifying a node list, in node order: those judged
    by their free resources alone (clean nodes of a class where that is all that matters),
    and the others (judged one by one). `fits` keeps, per set of class limits, the usage each
    fast node had and whether it was short then: the next triage re-judges only the nodes
    whose usage changed (a pod bound or finished there)."""

    __slots__ = ("_at", "fits", "healths", "klass", "names", "pos", "slow")

    def __init__(self, parts: list[tuple[int, NodeGroup, bool]]) -> None:
        fast: list[tuple[int, int, NodeHealth]] = []
        slow: list[tuple[int, int, Obj, NodeHealth]] = []
        for k, (_, group, by_resources) in enumerate(parts):
            for i, (node, health) in zip(group.idx, group.pairs, strict=True):
                if by_resources and health.clean and not health.contradiction:
                    fast.append((i, k, health))
                else:
                    slow.append((i, k, node, health))
        fast.sort(key=itemgetter(0))
        slow.sort(key=itemgetter(0))
        self.pos = [i for i, _, _ in fast]
        self.klass = [k for _, k, _ in fast]  # index of the node's class in `parts`
        self.healths = [h for _, _, h in fast]
        self.names = [h.name for h in self.healths]
        self.slow = slow
        # Each is several lists as long as the candidates (about 1 MB at 20,000 nodes): kept
        # for the pod shapes triaged last.
        self.fits: Recent[Hashable, _Fit] = Recent(16)
        self._at: dict[str, int] | None = None

    def positions(self) -> dict[str, int]:
        """Each fast node's index in `names`."""
        if self._at is None:
            self._at = {name: i for i, name in enumerate(self.names)}
        return self._at


def class_key(node: Obj, health: NodeHealth, keys: tuple[str, ...]) -> object:
    """What decides whether a pod could ever use a node: its health's signature (interned:
    equal ones are one object, so its id names the class, and the class holds the signature,
    so the id is not reused meanwhile) and the values of the labels `keys` (those the pod's
    selectors name)."""
    if not keys:
        return id(health.signature)
    labels = node["metadata"].get("labels") or {}
    return (id(health.signature), *map(labels.get, keys))


def node_groups(nodes: list[Obj], healths: list[NodeHealth], keys: tuple[str, ...]) -> NodeGroups:
    """`nodes` grouped by `class_key`, the groups in order of first sight."""
    found: dict[object, NodeGroup] = {}
    for i, (node, health) in enumerate(zip(nodes, healths, strict=True)):
        key = class_key(node, health, keys)
        group = found.get(key)
        if group is None:
            group = found[key] = NodeGroup(node, health)
        group.idx.append(i)
        group.pairs.append((node, health))
    return NodeGroups(list(found.values()))


def _in_node_order(parts: list[tuple[list[int], list[T]]]) -> list[T]:
    """The items of several groups, merged back into node order by their positions. (The
    positions are distinct, so sorting the pairs never compares two items.)"""
    if len(parts) == 1:
        return parts[0][1]
    merged = sorted(chain.from_iterable(zip(idx, items, strict=True) for idx, items in parts))
    return [item for _, item in merged]


class _Fit:
    """Which fast nodes of a layout were short of free resources at one usage snapshot (its
    mark), and the lists an evaluation takes from that: never mutated once made."""

    __slots__ = (
        "flags",
        "mark",
        "short",
        "short_names",
        "short_pos",
        "short_usage",
        "usable",
        "usable_pos",
        "used",
    )

    def __init__(
        self,
        mark: UsageMark | None,
        used: list[NodeUsage | None],
        flags: list[bool],
        layout: _Layout,
    ) -> None:
        self.mark, self.used, self.flags = mark, used, flags
        # Two lists, not one of pairs: at 20,000 nodes a list of pairs was 20,000 objects for
        # the cyclic GC to track on every change of usage.
        self.short = list(compress(layout.healths, flags))
        self.short_usage = list(compress(used, flags))
        self.short_names = list(compress(layout.names, flags))
        self.usable = list(compress(layout.names, map(not_, flags)))
        self.short_pos = list(compress(layout.pos, flags))
        self.usable_pos = list(compress(layout.pos, map(not_, flags)))

    def marked(self, mark: UsageMark | None, used: list[NodeUsage | None]) -> _Fit:
        """The same answer, at a later snapshot where no node's usage changed."""
        fit = copy(self)
        fit.mark, fit.used = mark, used
        return fit


def _inserted(items: list[T], positions: list[int], more: list[tuple[int, T]]) -> list[T]:
    """`items`, whose positions are `positions` (ascending), with `more` (position, item, in
    position order) inserted in position order."""
    if len(more) > 64:
        merged = sorted(chain(zip(positions, items, strict=True), more), key=itemgetter(0))
        return [item for _, item in merged]
    out = items.copy()
    for added, (at, item) in enumerate(more):
        out.insert(bisect(positions, at) + added, item)
    return out


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
        self.derived: dict[object, object] = {}
        # One node per class when the nodes were judged by class (`node_groups`): they carry
        # every value the cluster's nodes have for the labels the pod's selectors name.
        self.representatives: list[Obj] | None = None

    def short_names(self) -> list[str]:
        names = self.derived.get("short-names")
        if names is None:
            names = self.derived["short-names"] = [h.name for h in self.short]
        return names  # type: ignore[return-value]

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
            groups = memo.get_lists(
                ("node-groups", keys), (nodes, healths), lambda: node_groups(nodes, healths, keys)
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
        self, groups: NodeGroups, total: int, usage: Mapping[str, NodeUsage]
    ) -> Evaluation:
        """`evaluate` over nodes grouped by class: a class the pod could never use sends its
        nodes to their list at once; the other classes' nodes are judged one by one, and a
        clean node of a class where only free resources matter is re-judged only when its
        usage changed since the last triage of a pod with the same limits. Every list comes
        out in node order, as `evaluate`'s loop makes it."""
        out = Evaluation(self.requests)
        out.total = total
        out.representatives = [g.node for g in groups.groups]
        classes = [self._classify(g.node, g.health, out) for g in groups.groups]
        self._exclude(groups, classes, out)
        plain = self.filters is None
        parts = [
            (k, g, plain and c.fast)
            for k, (c, g) in enumerate(zip(classes, groups.groups, strict=True))
            if c.excluded is None
        ]
        layout = groups.remember(
            ("layout", *((k, by_resources) for k, _, by_resources in parts)),
            lambda: _Layout(parts),
        )
        fit = self._fits(layout, [classes[k] for k, _, _ in parts], usage)
        out.candidates = len(layout.names)
        out.short, out.short_usage, out.usable = fit.short, fit.short_usage, fit.usable  # shared
        if not layout.slow:
            out.derived["short-names"] = fit.short_names
            return out
        # The other candidates, one by one, merged into the fast ones' lists by position.
        rest = Evaluation(self.requests)
        short_at: list[tuple[int, NodeHealth]] = []
        short_usage_at: list[tuple[int, NodeUsage | None]] = []
        usable_at: list[tuple[int, str]] = []
        for i, k, node, health in layout.slow:
            n_short, n_usable = len(rest.short), len(rest.usable)
            self._candidate(rest, classes[parts[k][0]], node, health, usage.get(health.name))
            if len(rest.short) > n_short:
                short_at.append((i, rest.short[-1]))
                short_usage_at.append((i, rest.short_usage[-1]))
            elif len(rest.usable) > n_usable:
                usable_at.append((i, rest.usable[-1]))
        out.candidates += rest.candidates
        out.blocked, out.joining = rest.blocked, rest.joining
        out.contradictions = rest.contradictions
        if short_at:
            out.short = _inserted(out.short, fit.short_pos, short_at)
            out.short_usage = _inserted(out.short_usage, fit.short_pos, short_usage_at)
        else:
            out.derived["short-names"] = fit.short_names
        if usable_at:
            out.usable = _inserted(out.usable, fit.usable_pos, usable_at)
        return out

    def _exclude(self, groups: NodeGroups, classes: list[_Class], out: Evaluation) -> None:
        """Every node of an excluded class into its list, in node order, and the broken GPU
        nodes among them into the side findings: kept per way the groups are excluded."""

        def merged() -> tuple[ExcludedLists, list[tuple[str, NodeHealth]]]:
            into: dict[tuple[str, bool], list[NodeGroup]] = {}
            side: list[tuple[str, NodeGroup]] = []
            for klass, group in zip(classes, groups.groups, strict=True):
                if klass.excluded is not None:
                    into.setdefault((klass.category, group.health.gpu_node), []).append(group)
                    if klass.side:
                        side.append((klass.category, group))
            lists = {k: _in_node_order([(g.idx, g.pairs) for g in gs]) for k, gs in into.items()}
            flagged = [(g.idx, [(cat, h) for _, h in g.pairs]) for cat, g in side]
            return lists, _in_node_order(flagged) if flagged else []

        lists, side = groups.remember(
            ("excluded", *((c.category, c.side) for c in classes)), merged
        )
        for key, items in lists.items():  # `_classify` made the keys, in order of first sight
            out.excluded[key] = items
        out.side = side

    @staticmethod
    def _fits(layout: _Layout, classes: list[_Class], usage: Mapping[str, NodeUsage]) -> _Fit:
        """Which fast nodes of `layout` are short of the free resources the pod requests.
        Kept per set of class limits: only the nodes whose usage changed since are judged
        again, found from the usage index's log (`UsageSnapshot.changed_since`) or, for
        other usage, by comparing every node's usage by identity."""
        key = tuple((c.limits, c.max_pods) for c in classes)
        kept = layout.fits.get(key)
        short = [c.short for c in classes]
        names, klass = layout.names, layout.klass
        snapshot = usage if isinstance(usage, UsageSnapshot) else None
        mark = snapshot.mark if snapshot is not None else None
        changed: list[int] | None = None
        if kept is not None and snapshot is not None:
            nodes = snapshot.changed_since(kept.mark)
            if nodes is not None:
                at = layout.positions()
                changed = sorted(at[n] for n in nodes if n in at)
                used = kept.used.copy() if changed else kept.used
                for i in changed:
                    used[i] = usage.get(names[i])
        if changed is None:
            used = list(map(usage.get, names))
            if kept is not None:
                changed = list(compress(range(len(used)), map(is_not, used, kept.used)))
        if kept is None or changed is None:
            flags = list(map(lambda k, u: short[k](u), klass, used))
            fit = _Fit(mark, used, flags, layout)
        elif not changed:
            fit = kept if kept.mark == mark else kept.marked(mark, used)
        else:
            flags = kept.flags.copy()
            for i in changed:
                flags[i] = short[klass[i]](used[i])
            fit = _Fit(mark, used, flags, layout)
        layout.fits.put(key, fit)
        return fit

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
            out.short.append(health)
            out.short_usage.append(use)
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
