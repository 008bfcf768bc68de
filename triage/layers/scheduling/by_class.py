"""The by-class fast path of `Placement.evaluate`: the same answer, in less time.

Whether a pod could ever use a node depends only on the node's health signature and the
labels the pod's selectors name, so the nodes of a cluster fall into classes (`node_groups`),
remembered while the nodes and their health are the same objects. A class the pod could never
use sends all its nodes to their list at once; a clean node of a class where only free
resources matter is re-judged only when its usage changed since the last triage of a pod with
the same limits. Every list comes out in node order, exactly as the reference evaluator's
loop makes it: `tests/engine/test_placement_by_class.py` checks both ways agree.
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
from triage.cluster.usage import NodeUsage, UsageMark, UsageSnapshot, want
from triage.layers.node import NodeHealth
from triage.layers.scheduling.placement import Evaluation, NodeClass, Placement, class_key

T = TypeVar("T")
ExcludedLists = dict[tuple[str, bool], list[tuple[Obj, NodeHealth]]]


def evaluate(
    placement: Placement,
    nodes: list[Obj],
    healths: list[NodeHealth],
    usage: Mapping[str, NodeUsage],
    *,
    memo: IdentityMemo,
) -> Evaluation:
    """`placement.evaluate(nodes, healths, usage)`, over the nodes' classes (remembered in
    `memo` while the nodes and their health are the same objects) where the pod's placement
    depends only on classes: not for a pod bound by name or field, or restricted to the
    nodes publishing its DRA devices."""
    if placement.only_nodes is not None or placement.per_node:
        return placement.evaluate(nodes, healths, usage)
    keys = placement.keys
    groups = memo.get_lists(
        ("node-groups", keys), (nodes, healths), lambda: node_groups(nodes, healths, keys)
    )
    return _evaluate_groups(placement, groups, len(nodes), usage)


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


def _evaluate_groups(
    self: Placement, groups: NodeGroups, total: int, usage: Mapping[str, NodeUsage]
) -> Evaluation:
    """`evaluate` over nodes grouped by class: a class the pod could never use sends its
    nodes to their list at once; the other classes' nodes are judged one by one, and a
    clean node of a class where only free resources matter is re-judged only when its
    usage changed since the last triage of a pod with the same limits. Every list comes
    out in node order, as `evaluate`'s loop makes it."""
    out = Evaluation(self.requests)
    out.total = total
    out.representatives = [g.node for g in groups.groups]
    classes = [self.classify(g.node, g.health, out) for g in groups.groups]
    _exclude(groups, classes, out)
    out.excluded_classes = [
        (c.category, g.health)
        for c, g in zip(classes, groups.groups, strict=True)
        if c.excluded is not None
    ]
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
    # Usage read when asked (a live source) reads the candidates' together, and no other.
    want(usage, lambda: [*layout.names, *(health.name for *_, health in layout.slow)])
    fit = _fits(layout, [classes[k] for k, _, _ in parts], usage)
    out.candidates = len(layout.names)
    out.short, out.short_usage, out.usable = fit.short, fit.short_usage, fit.usable  # shared
    if not layout.slow:
        out.derived.short_names = fit.short_names
        return out
    # The other candidates, one by one, merged into the fast ones' lists by position.
    rest = Evaluation(self.requests)
    short_at: list[tuple[int, NodeHealth]] = []
    short_usage_at: list[tuple[int, NodeUsage | None]] = []
    usable_at: list[tuple[int, str]] = []
    for i, k, node, health in layout.slow:
        n_short, n_usable = len(rest.short), len(rest.usable)
        self.candidate(rest, classes[parts[k][0]], node, health, usage.get(health.name))
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
        out.derived.short_names = fit.short_names
    if usable_at:
        out.usable = _inserted(out.usable, fit.usable_pos, usable_at)
    return out


def _exclude(groups: NodeGroups, classes: list[NodeClass], out: Evaluation) -> None:
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

    lists, side = groups.remember(("excluded", *((c.category, c.side) for c in classes)), merged)
    for key, items in lists.items():  # `_classify` made the keys, in order of first sight
        out.excluded[key] = items
    out.side = side


def _fits(layout: _Layout, classes: list[NodeClass], usage: Mapping[str, NodeUsage]) -> _Fit:
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
