"""The driver and device-plugin verdict of every node, remembered across triages.

Every triage of a pod without a node judges every node (which could take the pod, and which
are broken), so on a 5,000-node cluster this is the hot loop. A watch-backed source replaces
a changed object and keeps the rest, so a node's verdict is kept while its Node object, its
GPU component pods and the cluster's stack flags are the same objects; the minute is part of
the check only for the few nodes whose verdict depends on the clock (a GPU node without
GPUs: joining, or late).
"""

from __future__ import annotations

from datetime import datetime
from itertools import compress, count
from operator import is_not

from triage.cluster.memo import IdentityMemo
from triage.cluster.objects import Obj, name_of
from triage.layers.node import NodeHealth, assess_node
from triage.layers.stacks.view import StackView


class NodeHealths:
    """Node health for one triage, over the memo of its cluster source."""

    def __init__(self, memo: IdentityMemo, *, now: datetime, grace_minutes: int) -> None:
        self.now, self.grace = now, grace_minutes
        self._minute = int(now.timestamp() // 60)
        self._signatures = memo.table("node-signatures", limit=10_000)
        self._table = memo.table(f"node-health/{grace_minutes}")
        self._last = memo.table(f"node-list/{grace_minutes}")

    def assess(self, node: Obj, view: StackView, *, name: str | None = None) -> NodeHealth:
        """One node's health, from the memo while the node and its stack pods are unchanged."""
        minute = self._minute
        name = name or name_of(node)
        hit = self._table.get(name)
        if hit is not None and hit[0] is node and (hit[2] == minute or not hit[3].clock):
            if hit[1] is view:
                return hit[3]  # type: ignore[no-any-return]
            # Some GPU component pod somewhere changed (a new view): this node's verdict still
            # holds if its own component pods and the cluster-wide flags did not change.
            pods = view.node_pods(name)
            if hit[1].flags == view.flags and _same(hit[4], pods):
                self._table[name] = (node, view, minute, hit[3], pods)
                return hit[3]  # type: ignore[no-any-return]
        health = assess_node(node, view, now=self.now, grace_minutes=self.grace)
        # Equal signatures become one object, so a node pool's nodes match by identity.
        health.signature = self._signatures.setdefault(health.signature, health.signature)
        self._table[name] = (node, view, minute, health, view.node_pods(name))
        return health

    def all(self, nodes: list[Obj], view: StackView) -> list[NodeHealth]:
        """The health of every node, in order.

        The same node list (a watch cache hands out one list while no node changed) under the
        same view in the same minute gets the same health list back: nothing is looked at.
        Otherwise, when the node list has the same length as last time, comparing it with the
        last one by identity (in C, no node is touched) finds the few nodes to reassess. A
        caller must not change the list it gets.
        """
        last = self._last.get("last")
        minute = self._minute
        if last is not None and last[2] is view and len(last[0]) == len(nodes):
            if last[0] is nodes and last[3] == minute:
                return last[1]  # type: ignore[no-any-return]
            changed = set(compress(count(), map(is_not, last[0], nodes)))
            if last[3] != minute:
                changed.update(i for i, h in enumerate(last[1]) if h.clock)
            healths: list[NodeHealth] = last[1]
            if changed:
                healths = list(healths)
                for i in changed:
                    healths[i] = self.assess(nodes[i], view)
        else:
            # The memo check of `assess`, inlined for the common case.
            table, assess = self._table, self.assess
            healths = []
            for node in nodes:
                name = node["metadata"]["name"]
                hit = table.get(name)
                if (
                    hit is not None
                    and hit[0] is node
                    and hit[1] is view
                    and (hit[2] == minute or not hit[3].clock)
                ):
                    healths.append(hit[3])
                else:
                    healths.append(assess(node, view, name=name))
        self._last["last"] = (nodes, healths, view, minute)
        return healths


def _same(a: tuple[Obj, ...], b: tuple[Obj, ...]) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b, strict=True))
