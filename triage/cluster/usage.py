"""What the pods bound to each node request: the scheduler's view of a node's "used".

`usage_of` computes it from a list of pods; `UsageIndex` keeps it current from pod changes.
Every triage needs "what is already allocated on each node"; recomputing it means walking all
pods (150,000 at the Kubernetes scalability limit). The index keeps each pod's contribution
and adjusts only the affected node on a change. Published `NodeUsage` values are replaced,
never mutated, so `snapshot()` is a cheap shallow copy a reader may keep, and an unchanged
node keeps its value (what a sweep compares by identity). Each change to a node's value is
numbered (a generation) and logged, so a reader that kept an answer derived from one snapshot
can ask which nodes changed before the next (`UsageSnapshot.changed_since`) instead of
comparing every node.

A source that reads the cluster per command need not read every pod: `LazyUsage` is the usage
it reads when asked (the live source reads the pods of the nodes asked about). The engine says
which nodes it is about to ask about (`want`), so they are read together, and reads it whole
(`read_whole`) before work that may ask about any node.
"""

from __future__ import annotations

import threading
from abc import abstractmethod
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field

from triage.cluster.objects import Obj, name_of, ns_of, pod_terminated
from triage.cluster.quantities import pod_requests


@dataclass(slots=True)
class NodeUsage:
    """What non-terminated pods bound to a node request: the scheduler's view of 'used'.

    `requests` maps resource names to integer amounts (cpu in millicores, memory in bytes,
    extended resources as counts). `pods` names the pods as "namespace/name".
    """

    requests: dict[str, int] = field(default_factory=dict)
    pods: list[str] = field(default_factory=list)


def usage_of(pods: Iterable[Obj]) -> dict[str, NodeUsage]:
    """Requests of non-terminated pods bound to each node: the scheduler's "used"."""
    index = UsageIndex()
    index.replace(pods)
    return index.snapshot()


class LazyUsage(Mapping[str, NodeUsage]):
    """Node usage read when asked, by a source that reads the cluster per command. Every read
    (`get`, `want`, `read_all`, iterating) may raise `ReadFailedError`."""

    @abstractmethod
    def want(self, names: Collection[str]) -> None:
        """The nodes about to be asked about: read them together, now."""

    @abstractmethod
    def read_all(self) -> None:
        """Read every node's usage now."""


def want(usage: Mapping[str, NodeUsage], names: Callable[[], Collection[str]]) -> None:
    """Say which nodes are about to be asked about, to usage read when asked (`LazyUsage`);
    `names` is called only then."""
    if isinstance(usage, LazyUsage):
        usage.want(names())


def read_whole(usage: Mapping[str, NodeUsage]) -> None:
    """Usage read when asked is read whole now (before work that may ask about any node)."""
    if isinstance(usage, LazyUsage):
        usage.read_all()


Contribution = tuple[str, dict[str, int]]


def contribution(pod: Obj) -> Contribution | None:
    # What this reads (with `pod_requests`) is all a live source decodes of the pods it reads
    # for usage alone (`kube.decode.usage_decoder`): read a new field of them there too.
    node = (pod.get("spec") or {}).get("nodeName")
    if not node or pod_terminated(pod):
        return None
    return str(node), pod_requests(pod)


UsageMark = tuple["UsageIndex", int]  # an index and one of its generations


class UsageSnapshot(dict[str, NodeUsage]):
    """The usage of every node at one generation of a `UsageIndex`."""

    __slots__ = ("_index", "generation")
    _index: UsageIndex
    generation: int

    def __init__(self, usage: dict[str, NodeUsage], index: UsageIndex, generation: int) -> None:
        super().__init__(usage)
        self._index, self.generation = index, generation

    @property
    def mark(self) -> UsageMark:
        """Where this snapshot was taken: its index and generation."""
        return self._index, self.generation

    def changed_since(self, mark: UsageMark | None) -> set[str] | None:
        """The nodes whose usage differs between the snapshot `mark` names and this one;
        None when that is not known (another index, a relist between them, or so many
        changes that the log no longer reaches back)."""
        if mark is None or mark[0] is not self._index:
            return None
        return self._index.changed_between(mark[1], self.generation)


class UsageIndex:
    """`usage_of`, kept current pod change by pod change (thread-safe). A change names the
    pod as the index was last told of it (`change(old, new)`), so a pod's contribution is
    worked out from that object again rather than kept for every pod (44 bytes a pod)."""

    LOG = 20_000  # node changes remembered for `changed_between`

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._usage: dict[str, NodeUsage] = {}
        self._generation = 0
        self._log: list[tuple[int, str]] = []  # (generation, node), one per generation
        self._last: UsageSnapshot | None = None

    def replace(self, pods: Iterable[Obj]) -> None:
        """Rebuild from a full list (initial sync or relist)."""
        usage: dict[str, NodeUsage] = {}
        for pod in pods:
            c = contribution(pod)
            if c is None:
                continue
            u = usage.get(c[0])
            if u is None:  # not setdefault: that would make a NodeUsage for every pod
                u = usage[c[0]] = NodeUsage()
            for res, amount in c[1].items():
                u.requests[res] = u.requests.get(res, 0) + amount
            u.pods.append(f"{ns_of(pod)}/{name_of(pod)}")
        with self._lock:
            self._usage = usage
            self._generation += 1  # nothing before this is comparable with what follows
            self._log.clear()

    def change(self, old: Obj | None, new: Obj | None) -> None:
        """A pod changed from `old` (as this index was last given it: by `replace` or
        `change`; None when it is new) to `new` (None when it is gone)."""
        c_old = contribution(old) if old is not None else None
        c_new = contribution(new) if new is not None else None
        if c_old == c_new:
            return
        pod = new if new is not None else old or {}
        ref = f"{ns_of(pod)}/{name_of(pod)}"
        with self._lock:
            if c_old is not None:
                self._adjust(c_old, ref=ref, sign=-1)
            if c_new is not None:
                self._adjust(c_new, ref=ref, sign=1)

    def _adjust(self, c: Contribution, *, ref: str, sign: int) -> None:
        node, reqs = c
        cur = self._usage.get(node) or NodeUsage()
        requests = dict(cur.requests)
        for res, amount in reqs.items():
            requests[res] = requests.get(res, 0) + sign * amount
            if requests[res] == 0:
                del requests[res]
        pods = [p for p in cur.pods if p != ref] if sign < 0 else [*cur.pods, ref]
        if pods:
            self._usage[node] = NodeUsage(requests=requests, pods=pods)
        else:
            self._usage.pop(node, None)
        self._generation += 1
        self._log.append((self._generation, node))
        if len(self._log) > 2 * self.LOG:
            del self._log[: self.LOG]

    def snapshot(self) -> UsageSnapshot:
        """The usage of every node now: one snapshot per generation, shared by its readers
        (a reader must not change it)."""
        with self._lock:
            last = self._last
            if last is None or last.generation != self._generation:
                last = self._last = UsageSnapshot(self._usage, self, self._generation)
            return last

    def changed_between(self, one: int, other: int) -> set[str] | None:
        """The nodes changed after generation `one` up to `other` (either order), if logged."""
        lo, hi = min(one, other), max(one, other)
        with self._lock:
            log = self._log
            if lo == hi:
                return set()
            if not log or lo + 1 < log[0][0] or hi > log[-1][0]:
                return None
            first = log[0][0]
            return {node for _, node in log[lo + 1 - first : hi + 1 - first]}
