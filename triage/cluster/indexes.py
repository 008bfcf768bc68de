"""Indexes over a kind's objects, the way client-go's informers keep indexers: a function names
the keys an object files under, and a source that holds objects in memory can answer "which
pods does this Job own" or "which pods are not running fine" without walking every pod.

A source offers them through an optional method `indexed(kind, index, key) -> list[Obj] |
None` (`MemorySource` builds each index on first use, the watch cache keeps them current;
None: not indexed here). `by_index` then scans, in the narrowest scope the key allows (a
namespace), so a live source lists no more than it would without indexes.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import TYPE_CHECKING

from triage.cluster.objects import (
    OWNER_KINDS,
    Obj,
    PerSpec,
    meta,
    name_of,
    ns_of,
    pod_active,
    pod_problem,
    wants_pods,
)

if TYPE_CHECKING:
    from triage.cluster.source import ClusterSource

Indexer = Callable[[Obj], Iterable[Hashable]]

# (namespace, owner kind, owner name) for each of a pod's owner references.
POD_OWNER = "pod-owner"
# Pods not running fine (`pod_problem`) that have not succeeded, under their namespace and
# under ANY: the fleet view looks for stuck GPU workloads among them.
POD_TROUBLED = "pod-troubled"
ANY = "*"
# A workload kind's objects by (namespace, name): a sweep asks whether each stuck pod's owner
# exists. A source whose store is keyed so (the watch cache, MemorySource) answers it from
# the store, with nothing built; others build it as any index.
BY_NAME = "by-name"
# Jobs and StatefulSets that want pods (`wants_pods`), under their owner key (namespace, kind,
# name): the key their pods file under in POD_OWNER, so that a sweep finds the ones without
# pods (`Index.unmatched`) without walking the 72,000 open Jobs of a 20,000-node batch
# cluster, nor every Job it keeps once finished. (ReplicaSets are looked at from their list:
# two may stand for one Deployment, and which comes first then names the item.)
WORKLOAD_OPEN = "workload-open"
# The active pods (`pod_active`) of a namespace, or under ANY of every one, in the order the
# source lists them: what the scheduling filters count (spread, pod affinity, a volume's one
# user). Kept by no index here: a source that reads from the API answers it by a list that
# leaves the finished pods on the server (a batch namespace's are most of its pods); others
# answer None and the caller keeps the active ones of the namespace's pods.
POD_ACTIVE = "pod-active"


def _owner_keys(pod: Obj) -> Iterable[Hashable]:
    m = meta(pod)
    refs = m.get("ownerReferences")
    if not refs:
        return ()
    ns = m.get("namespace") or ""
    keys = []
    for r in refs:  # a loop: this runs for every pod of a list
        keys.append((ns, r.get("kind"), r.get("name")))
    return keys


# A pod's problem is its status's (`pod_problem` reads nothing else), and the cache's pods of
# one workload share their status (`kube.slim`): worked out once per status.
_PROBLEMS = PerSpec(limit=5_000)


def _troubled_keys(pod: Obj) -> Iterable[Hashable]:
    status = pod.get("status") or {}
    if status.get("phase") == "Succeeded":
        return ()
    if _PROBLEMS.of(status, _problem) is None:
        return ()
    return (meta(pod).get("namespace") or "", ANY)


def _problem(status: Obj) -> str | None:
    return pod_problem({"status": status}, messages=False)


def _open_keys(kind: str) -> Indexer:
    def keys(workload: Obj) -> Iterable[Hashable]:
        try:
            wanted = wants_pods(workload)
        except (AttributeError, TypeError, ValueError):  # an odd value: the sweep looks at it
            wanted = True
        return ((ns_of(workload), kind, name_of(workload)),) if wanted else ()

    return keys


def _name_keys(obj: Obj) -> Iterable[Hashable]:
    m = meta(obj)
    return ((m.get("namespace") or "", m.get("name") or ""),)


INDEXERS: dict[tuple[str, str], Indexer] = {
    ("Pod", POD_OWNER): _owner_keys,
    ("Pod", POD_TROUBLED): _troubled_keys,
    **{(kind, BY_NAME): _name_keys for kind in OWNER_KINDS},
    ("Job", WORKLOAD_OPEN): _open_keys("Job"),
    ("StatefulSet", WORKLOAD_OPEN): _open_keys("StatefulSet"),
}


def kept(kind: str, index: str) -> bool:
    """Whether a source that keeps indexes keeps this one: `BY_NAME` (its store) or one of
    `INDEXERS`. Asked of any other (`POD_ACTIVE`), it answers None: the caller scans."""
    return index == BY_NAME or (kind, index) in INDEXERS


class Index:
    """One index: key -> the objects filed under it, kept current with `update` as objects
    change (an object is replaced, never mutated, and `update` is given the very object the
    index holds). A key with one object holds it alone; more are held by identity. A tuple key
    is filed under its head, then its last part: a pod's (namespace, kind, owner name) then
    costs no tuple of its own, only the name string its pod already holds. (At 150,000 pods
    with an owner each, a dict per owner cost 52 MB, a tuple per owner 8.6 MB more than this.)"""

    __slots__ = ("_by_head", "_fn")

    def __init__(self, fn: Indexer, objects: Iterable[Obj]) -> None:
        self._fn = fn
        self._by_head: dict[Hashable, dict[Hashable, Obj | _Bucket]] = {}
        for obj in objects:
            self._add(obj)

    def _add(self, obj: Obj) -> None:
        by_head = self._by_head
        for k in self._fn(obj):
            if type(k) is tuple and len(k) > 1:  # `_split`, inline: this runs for every pod
                head, last = k[:-1], k[-1]
            else:
                head, last = None, k
            filed = by_head.get(head)
            if filed is None:
                filed = by_head[head] = {}
            held = filed.get(last)
            if held is None:
                filed[last] = obj
            elif isinstance(held, _Bucket):
                held[id(obj)] = obj
            elif held is not obj:
                filed[last] = _Bucket({id(held): held, id(obj): obj})

    def update(self, old: Obj | None, new: Obj | None) -> None:
        if old is not None:
            by_head = self._by_head
            for k in self._fn(old):
                head, last = _split(k)
                filed = by_head.get(head)
                held = None if filed is None else filed.get(last)
                if held is None or filed is None:
                    continue
                if held is old:
                    del filed[last]
                    if not filed:
                        del by_head[head]
                elif isinstance(held, _Bucket):
                    held.pop(id(old), None)
                    if len(held) == 1:
                        filed[last] = next(iter(held.values()))
        if new is not None:
            self._add(new)

    def get(self, key: Hashable) -> list[Obj]:
        head, last = _split(key)
        held = self._by_head.get(head, {}).get(last)
        if held is None:
            return []
        return list(held.values()) if isinstance(held, _Bucket) else [held]

    def filed(self, keys: Iterable[Hashable]) -> list[bool]:
        """For each of `keys`, whether anything is filed under it: `get` without the lists,
        for a sweep that asks it of tens of thousands of keys at once."""
        by_head, out = self._by_head, []
        for k in keys:
            if type(k) is tuple and len(k) > 1:  # `_split`, inline
                filed = by_head.get(k[:-1])
                out.append(filed is not None and k[-1] in filed)
            else:
                filed = by_head.get(None)
                out.append(filed is not None and k in filed)
        return out

    def unmatched(self, other: Index) -> list[Obj]:
        """The objects filed here under a key that nothing is filed under in `other` (an index
        whose keys have the same form): the open workloads without pods, asked of the pod
        owners' index dict by dict, without reading a workload (4 ms for 72,000 open Jobs,
        where building their keys and asking for each took 96 ms)."""
        out: list[Obj] = []
        for head, filed in self._by_head.items():
            theirs = other._by_head.get(head) or {}
            for last in [k for k in filed if k not in theirs]:
                held = filed[last]
                if isinstance(held, _Bucket):
                    out.extend(held.values())
                else:
                    out.append(held)
        return out

    def __len__(self) -> int:
        """How many keys have objects filed under them."""
        return sum(len(filed) for filed in self._by_head.values())


def _split(key: Hashable) -> tuple[Hashable, Hashable]:
    if type(key) is tuple and len(key) > 1:
        return key[:-1], key[-1]
    return None, key


class _Bucket(dict[int, Obj]):
    """The objects filed under one key, by identity (a plain dict is an object itself)."""

    __slots__ = ()


def by_index(
    source: ClusterSource, kind: str, index: str, key: Hashable, *, namespace: str | None
) -> list[Obj]:
    """The objects of `kind` filed under `key` in `index`; `namespace` is where to scan when
    the source keeps no index."""
    found = source.indexed(kind, index, key)
    if found is not None:
        return list(found)
    fn = INDEXERS[(kind, index)]
    return [o for o in source.objects(kind, namespace=namespace) if key in fn(o)]


def active_pods(source: ClusterSource, *, namespace: str | None) -> list[Obj]:
    """The active pods of `namespace` (None: of every namespace), as the source lists them."""
    found = source.indexed("Pod", POD_ACTIVE, ANY if namespace is None else namespace)
    if found is not None:
        return list(found)
    return [p for p in source.objects("Pod", namespace=namespace) if pod_active(p)]


def owned_pods(
    source: ClusterSource, *, namespace: str, owners: Iterable[tuple[str, str]]
) -> list[Obj]:
    """The pods of `namespace` with an owner reference to one of `owners` ((kind, name)),
    each once (one scan of the namespace's pods where the source keeps no index)."""
    keys = [(namespace, kind, name) for kind, name in dict.fromkeys(owners)]
    found = [source.indexed("Pod", POD_OWNER, k) for k in keys]
    if all(f is not None for f in found):
        seen: dict[int, Obj] = {}
        for pods in found:
            for p in pods or ():
                seen.setdefault(id(p), p)
        return list(seen.values())
    wanted = set(keys)
    return [
        p
        for p in source.objects("Pod", namespace=namespace)
        if any(k in wanted for k in _owner_keys(p))
    ]


def owners_with_pods(source: ClusterSource, owners: Sequence[tuple[str, str, str]]) -> list[bool]:
    """For each of `owners` ((namespace, kind, name)), whether a pod of its namespace has an
    owner reference to it, as `owned_pods` would find: asked of the source's index at once
    (a sweep asks it of every Job that wants pods: 72,000 at 20,000 nodes), else from one
    scan of each namespace's pods."""
    found = source.filed("Pod", POD_OWNER, owners)
    if found is not None:
        return found
    owning: dict[str, set[Hashable]] = {}
    for ns in dict.fromkeys(ns for ns, _, _ in owners):
        owning[ns] = {k for p in source.objects("Pod", namespace=ns) for k in _owner_keys(p)}
    return [key in owning[key[0]] for key in owners]


def troubled_pods(source: ClusterSource, *, namespace: str | None) -> list[Obj]:
    """Pods not running fine (and not succeeded), in `namespace` or everywhere (None)."""
    key = ANY if namespace is None else namespace
    return by_index(source, "Pod", POD_TROUBLED, key, namespace=namespace)
