"""What the pods on each node request, read for the nodes a triage asks about.

A CLI triage used to list every running pod of the cluster to know what each node has left
(150,000 pods at 5,000 nodes), though a pod pinned to a pool of 40 nodes asks about 40 of
them. `NodeUsageReads` is the live source's `node_usage()`: the engine first decides which
nodes the pod could use, says so (`want`), and only those nodes' pods are read, one request
per node (`spec.nodeName=X`, answered from the API server's per-node index, as it answers
every kubelet), several at once. Past a share of the cluster's nodes one list of every pod
is cheaper (a pod that fits anywhere), and the whole cluster is read instead.

Not thread-safe: one command's triage asks from one thread (the reads it starts run on the
source's pool).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Sequence
from typing import TypeVar

from triage.cluster.objects import Obj
from triage.cluster.usage import LazyUsage, NodeUsage, usage_of

T = TypeVar("T")
Parallel = Callable[[Callable[[str], T], Sequence[str]], list[T]]

# Nodes always read one by one when wanted: a small pool answers in well under a second.
SMALL_POOL = 64
# Beyond that, nodes are read one by one while they are at most this share of the cluster's
# nodes. Per node, a request carries that node's pods only; a full list carries every pod
# of the cluster, 500 a page, each page waiting for the one before. With 30 pods a node, the
# full list is N/17 pages in sequence and `PARALLEL` per-node requests run at once: per node
# is fewer round trips up to about N/2 nodes and fewer pods always; an eighth keeps the
# requests to the API server within a few times the full list's pages.
SHARE = 8
# Nodes asked about one at a time, unannounced, before the whole cluster is read instead.
SINGLES = 16


class NodeUsageReads(LazyUsage):
    """`Mapping[str, NodeUsage]` of the nodes' usage, read per node as asked, or whole."""

    def __init__(
        self,
        *,
        node_pods: Callable[[str], list[Obj]],
        all_pods: Callable[[], list[Obj]],
        node_count: Callable[[], int | None],
        parallel: Parallel[list[Obj]],
    ) -> None:
        self._node_pods, self._all_pods = node_pods, all_pods
        self._node_count, self._parallel = node_count, parallel
        self._known: dict[str, NodeUsage | None] = {}  # read per node: None has no pod
        self._all: dict[str, NodeUsage] | None = None
        self._singles = 0
        self.nodes_read = 0  # nodes read one by one (for tests and the bench)

    @property
    def whole(self) -> bool:
        """Whether every pod of the cluster was read (instead of some nodes')."""
        return self._all is not None

    def limit(self) -> int:
        """How many nodes are read one by one before the whole cluster is read instead."""
        nodes = self._node_count()
        return SMALL_POOL if nodes is None else max(SMALL_POOL, nodes // SHARE)

    def want(self, names: Collection[str]) -> None:
        if self._all is not None:
            return
        missing = [n for n in dict.fromkeys(names) if n not in self._known]
        if not missing:
            return
        if len(self._known) + len(missing) > self.limit():
            self.read_all()
            return
        for name, pods in zip(missing, self._parallel(self._node_pods, missing), strict=True):
            self._known[name] = usage_of(pods).get(name)
        self.nodes_read += len(missing)

    def read_all(self) -> None:
        if self._all is None:
            self._all = usage_of(self._all_pods())
            self._known.clear()

    def get(self, name: str, default: NodeUsage | None = None) -> NodeUsage | None:  # type: ignore[override]
        found = self._lookup(name)
        return default if found is None else found

    def _lookup(self, name: str) -> NodeUsage | None:
        if self._all is not None:
            return self._all.get(name)
        if name not in self._known:
            self._singles += 1
            if self._singles > SINGLES or len(self._known) >= self.limit():
                self.read_all()
                return self._all.get(name) if self._all is not None else None
            self._known[name] = usage_of(self._node_pods(name)).get(name)
            self.nodes_read += 1
        return self._known[name]

    def __getitem__(self, name: str) -> NodeUsage:
        found = self._lookup(name)
        if found is None:
            raise KeyError(name)
        return found

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self._lookup(name) is not None

    def _whole(self) -> dict[str, NodeUsage]:
        self.read_all()
        assert self._all is not None
        return self._all

    def __iter__(self) -> Iterator[str]:
        return iter(self._whole())

    def __len__(self) -> int:
        return len(self._whole())
