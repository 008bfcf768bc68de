"""The live ClusterSource: reads the cluster per command through the kubernetes client.

`connect()` picks the kubeconfig context (or in-cluster config). `LiveSource` serves one
command (a triage, a sweep): each list it reads is kept for the command's life, so the
command sees one state of the cluster and never reads a list twice; a namespace's objects
come from the cluster-wide list when that was read, and so do single objects. Lists of pods
and nodes are decoded against the fields the engine reads (`kube.decode`), as the cache's
are. What each node's pods request is read for the nodes a triage asks about
(`kube.node_usage`). Reads the command will make anyway are started together at once
(`read_ahead`), a few at a time on the source's own threads. A sweep's lists of every pod
and every Job hold the finished ones aside, as the cache does (`kube.aside`): known by
name, read from the API when a question is about one. For a bot serving many triages,
`kube.cache.CachedSource` keeps the same data warm through watches.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from functools import partial
from typing import Any, TypeVar

from kube import aside
from kube.aside import Aside, Held, HeldAside, finished_job, holding, job_of_finished
from kube.aside import kept as aside_kept
from kube.client import RawClient, context_namespace, load_client
from kube.decode import list_decoder, usage_decoder
from kube.fastjson import gc_paused
from kube.lists import PAGE_SIZE, events_for, kind_type, list_objects
from kube.node_usage import NodeUsageReads
from kube.share import Sharer
from kube.slim import PROJECTED, projection
from kube.transport import Deadline
from kube.workers import Workers
from triage.cluster.indexes import ANY, INDEXERS, POD_ACTIVE, Index
from triage.cluster.objects import Obj, name_of, ns_of, pod_active
from triage.cluster.source import (
    KINDS,
    Named,
    ReadFailedError,
    SourceDefaults,
    by_namespace,
    filed_at,
    filing,
)
from triage.cluster.usage import NodeUsage

ACTIVE_PODS = "status.phase!=Succeeded,status.phase!=Failed"
_K = TypeVar("_K")
WORKERS = 8  # requests in flight at once (the client's connection pool holds 32)

Read = tuple[str, str | None]  # (kind, namespace or None for all)
# What a triage reads cluster-wide whatever its pod: the nodes, and what finds the GPU stack.
TRIAGE_READS: tuple[Read, ...] = (("Node", None), ("DaemonSet", None), ("ClusterPolicy", None))
# The pods' owners whose strings they take, when both are read for a sweep (`read_ahead`).
_POD_OWNERS: Read = ("Job", None)
_PODS: Read = ("Pod", None)
# What a sweep of every namespace reads: every kind the engine reads, cluster-wide (the
# stuck workloads are found among every pod, job and replica set; events are listed once).
SWEEP_READS: tuple[Read, ...] = tuple((kind, None) for kind in KINDS)
READ_AHEAD = {"triage": TRIAGE_READS, "sweep": SWEEP_READS}


def connect(
    *,
    kubeconfig: str | None = None,
    context: str | None = None,
    timeout: float | None = None,
    page_size: int = PAGE_SIZE,
    read_ahead: str | None = None,
    wide_timeout: float | None = None,
) -> LiveSource:
    """A LiveSource for the kubeconfig context (current one by default) or in-cluster config.
    `timeout` bounds, in seconds, everything it will send (None: each request only);
    `wide_timeout` does instead once it lists every pod of the cluster (`Deadline.widen`).
    `read_ahead` names what the command is ("triage", "sweep"): what any such command reads
    is then started at once, in parallel.

    Raises `kube.errors.ConfigError` (a `SourceError`) when no usable configuration exists.
    Nothing is sent to the cluster before the first read (or `read_ahead`).
    """
    api, name = load_client(kubeconfig=kubeconfig, context=context)
    source = LiveSource(
        RawClient(api, cluster_name=name, deadline=Deadline(timeout, wide=wide_timeout)),
        page_size=page_size,
        freeze_gc=True,
    )
    source.default_namespace = context_namespace(kubeconfig=kubeconfig, context=context)
    if read_ahead is not None:
        source.read_ahead(READ_AHEAD[read_ahead])
    return source


class LiveSource(SourceDefaults):
    """ClusterSource over direct API reads, for one command: what it lists is kept.

    `freeze_gc` (a command's process, `connect`): what each list built is frozen out of the
    cyclic GC's generations, as the cache's lists are (`kube.fastjson`): otherwise the next
    full collection walks every object read so far (a second, at 5,000 nodes, in the first
    triage's allocations after the lists). A long-lived process leaves it off: what a
    frozen object holds is never collected."""

    def __init__(
        self,
        client: RawClient,
        *,
        page_size: int = PAGE_SIZE,
        workers: int = WORKERS,
        freeze_gc: bool = False,
    ) -> None:
        self.client = client
        self.page_size = page_size
        self.freeze_gc = freeze_gc
        self.default_namespace = None  # the context's namespace, as kubectl uses (connect)
        self._workers = Workers(workers)
        self._lock = threading.Lock()
        self._lists: dict[Read, Future[list[Obj]]] = {}
        self._named: dict[Read, dict[str, dict[str, Obj]]] = {}  # namespace -> name -> object
        self._node_pods: dict[tuple[str, str], Obj] = {}  # pods read with their node's
        self._indexes: dict[tuple[str, str], Index] = {}
        self._active: dict[str | None, Future[list[Obj]]] = {}  # POD_ACTIVE, by namespace
        self._usage: NodeUsageReads | None = None
        self._held: dict[str, HeldAside] = {}  # by kind: what its cluster-wide list held aside

    @property
    def cluster_name(self) -> str:
        return self.client.cluster_name

    # --- lists, each read once ---------------------------------------------------------

    def read_ahead(self, reads: Iterable[Read]) -> None:
        """Start these lists now, in parallel. A list that fails is said when it is asked
        for (a namespace's objects are then read for themselves: narrow RBAC may allow
        that where it forbids the cluster-wide list)."""
        reads = list(reads)
        # Every pod and every Job, at once (one after the other, they took 9-14% less time here
        # and twice as long against a server 50 ms a page away). The Jobs' list starts first,
        # and the pods' projection takes the strings of the Jobs read so far (filed as their
        # pages come), so that a Job's pods hold its own name and uid: 137 bytes a pod. The
        # finished ones are held aside (see the module).
        jobs: Named | None = None
        if _POD_OWNERS in reads and _PODS in reads:
            jobs = {}
            reads.remove(_POD_OWNERS)
            reads.insert(0, _POD_OWNERS)
        for kind, namespace in reads:
            read: Callable[[], list[Obj]] | None = None
            if jobs is not None and (kind, namespace) == _POD_OWNERS:
                read = partial(self._list, kind, namespace, filed=jobs, aside=finished_job)
            elif jobs is not None and (kind, namespace) == _PODS:
                owner = _owner_in(jobs)
                read = partial(self._list, kind, namespace, owner=owner, aside=job_of_finished)
            start = (
                self._workers.submit if read is None else lambda _, r=read: self._workers.submit(r)
            )
            self._started(kind, namespace, start)

    def _started(
        self,
        kind: str,
        namespace: str | None,
        start: Callable[[Callable[[], list[Obj]]], Future[list[Obj]]] | None = None,
    ) -> Future[list[Obj]]:
        """The list of `kind` in `namespace`, started by `start` unless it was (None: read on
        this thread, see `_once`)."""
        rt = kind_type(kind)
        key = (kind, namespace if rt.namespaced else None)
        if start is None:
            return self._once(self._lists, key, lambda: self._list(*key))
        with self._lock:
            found = self._lists.get(key)
            if found is None:
                found = self._lists[key] = start(lambda: self._list(*key))
        return found

    def _once(
        self, table: dict[_K, Future[list[Obj]]], key: _K, read: Callable[[], list[Obj]]
    ) -> Future[list[Obj]]:
        """`table[key]`, read on this thread when no other read it or is reading it, outside
        the lock: a long list asks for the namespaces to read it by (`_namespace_names`,
        possibly from another thread), a list of its own. A read that fails is kept failed,
        as a list is; an unexpected error is raised to every reader, and forgotten."""
        with self._lock:
            found = table.get(key)
            if found is not None:
                return found
            found = table[key] = Future()
        try:
            found.set_result(read())
        except ReadFailedError as e:
            found.set_exception(e)
        except BaseException as e:
            with self._lock:
                del table[key]
            found.set_exception(e)
            raise
        return found

    def _list(
        self,
        kind: str,
        namespace: str | None,
        selector: str | None = None,
        decode: Callable[[bytes], Any] | None = None,
        owner: Callable[[str, str, Any], Obj | None] | None = None,
        filed: Named | None = None,
        slim: bool = False,
        aside: Aside | None = None,
    ) -> list[Obj]:
        """The objects of a list, slimmed as the cache's are when every one is read. The
        projection takes the strings of the owners `owner` finds (`Sharer`); with `filed`,
        each object is filed there as it is read, by namespace and name, and `_named_in`
        then answers from it. `slim`: a selected list of every namespace's is slimmed too.
        `aside`: the objects of a cluster-wide list to hold aside (see the module)."""
        # Every pod of the cluster (a sweep's): slimmed page by page as the cache's are,
        # sharing what pods share; a few KB a pod as decoded, 1 KB slimmed. So is every
        # workload with a pod template (a batch cluster's Jobs are as many as its pods, and
        # 16 KB each decoded whole). Events (every one, for a sweep): what they repeat kept
        # once (`kube.slim.slim_event`).
        whole = kind in PROJECTED and namespace is None and (selector is None or slim)
        rt = kind_type(kind)
        # Every namespace's objects (every active pod's too): a long list, read by namespace
        # when its round trips set its pace (`kube.lists.list_objects`).
        every = rt.namespaced and namespace is None and selector in (None, ACTIVE_PODS)
        if every and kind == "Pod":
            self.client.deadline.widen()  # every pod of the cluster: 1,200 pages at 20k nodes
        project = projection(kind, Sharer(owner=owner)) if whole or kind == "Event" else None
        transform = project if filed is None else partial(filing, filed, project)
        held: Held = {}
        if aside is not None:
            transform = holding(transform or _same, aside, held)

        def restarted() -> None:
            held.clear()
            if filed is not None:
                filed.clear()

        with gc_paused(freeze=self.freeze_gc):
            items, _ = list_objects(
                self.client,
                rt,
                namespace=namespace,
                field_selector=selector,
                page_size=self.page_size,
                decode=decode or list_decoder(kind, projected=whole),  # what is read
                transform=transform,
                restarted=restarted,
                namespaces=self._namespace_names if every else None,
            )
        if aside is not None:
            items = aside_kept(items, held)
            self._held[kind] = HeldAside(held)
        if filed is not None:
            self._named[(kind, namespace)] = filed
        return items

    def _namespace_names(self) -> list[str] | None:
        """The cluster's namespaces, to read a long list by (`kube.lists.list_objects`); None
        when they cannot be listed."""
        try:
            return [name_of(n) for n in self.objects("Namespace")]
        except ReadFailedError:
            return None

    def _whole(self, kind: str) -> list[Obj] | None:
        """The cluster-wide list of `kind` when it was read (or is being read), else None."""
        started = self._lists.get((kind, None))
        if started is None:
            return None
        try:
            return started.result()
        except ReadFailedError:
            return None

    def objects(self, kind: str, *, namespace: str | None = None) -> list[Obj]:
        rt = kind_type(kind)
        if rt.namespaced and namespace is not None and (kind, namespace) not in self._lists:
            whole = self._whole(kind)
            if whole is not None:
                return self._started(
                    kind, namespace, lambda _: _done(self._in_namespace(kind, whole, namespace))
                ).result()
        return self._started(kind, namespace).result()

    def _in_namespace(self, kind: str, whole: list[Obj], namespace: str) -> list[Obj]:
        """The objects of a cluster-wide list in `namespace`, in the list's order: from the
        by-name table (no scan of every pod) unless some name came twice."""
        named = self._named_in((kind, None))
        if named is not None and sum(map(len, named.values())) == len(whole):
            return list(named.get(namespace, {}).values())
        return [o for o in whole if ns_of(o) == namespace]

    def get(self, kind: str, name: str, *, namespace: str | None = None) -> Obj | None:
        rt = kind_type(kind)
        ns = namespace if rt.namespaced else None
        for key in dict.fromkeys([(kind, ns), (kind, None)]):
            if key in self._lists:
                listed = self._named_in(key)
                if listed is not None:
                    found = listed.get(ns or "", {}).get(name)
                    held = self._held.get(kind) if found is None else None
                    if held is not None and held.aside_of(ns or "", name) is not None:
                        return next(iter(self._read_held(kind)(ns or "", [name])), None)
                    return found
        if kind == "Pod" and (ns or "", name) in self._node_pods:
            return self._node_pods[(ns or "", name)]
        return self._get(kind, name, ns)

    def _get(self, kind: str, name: str, namespace: str | None) -> Obj | None:
        """One object read from the API (None: there is none of that name)."""
        rt = kind_type(kind)
        obj = self.client.get_json(rt, verb="get", namespace=namespace, name=name)
        if obj is not None:
            obj.setdefault("kind", rt.kind)
            obj.setdefault("apiVersion", rt.api_version)
        return obj

    def _read_held(self, kind: str) -> aside.ReadHeld:
        """Reads objects of `kind` held aside from the API, projected as the list's were."""

        def read(namespace: str, names: list[str]) -> list[Obj]:
            get = partial(self._get, kind, namespace=namespace)
            project = projection(kind, Sharer())
            return aside.read_held(
                self.client, kind_type(kind), namespace, names, get=get, project=project
            )

        return read

    def _named_in(self, key: Read) -> dict[str, dict[str, Obj]] | None:
        """The objects of a list read (or being read) by namespace, then name; None when it
        failed."""
        found = self._named.get(key)
        if found is None:
            try:
                items = self._lists[key].result()
            except ReadFailedError:
                return None
            found = self._named.get(key)  # filed as it was read
            if found is None:
                found = self._named[key] = by_namespace(items)
        return found

    def indexed(self, kind: str, index: str, key: Hashable) -> list[Obj] | None:
        """Objects filed under `key` in an index of `triage.cluster.indexes`, built on first
        use from the cluster-wide list of `kind` when it was read (a sweep finds every stuck
        workload's pods without scanning a namespace per workload); None otherwise (the
        caller scans what it reads). `POD_ACTIVE` is answered by a list of its own."""
        if (kind, index) == ("Pod", POD_ACTIVE):
            return self._active_of(None if key == ANY else str(key))
        built = self._index(kind, index)
        if built is None:
            return None
        held = self._held.get(kind)
        found = built.get(key)
        return (
            found
            if held is None
            else aside.indexed(found, held, kind, index, key, self._read_held(kind))
        )

    def _active_of(self, namespace: str | None) -> list[Obj]:
        """The active pods of `namespace` (None: of every one), in the API server's order:
        kept from its pods when they were read, else listed by a field selector that leaves
        the finished ones on the server (in a batch namespace, most of its pods)."""
        if ("Pod", None) in self._lists or ("Pod", namespace) in self._lists:
            pods = self.objects("Pod", namespace=namespace)
        else:
            read = partial(self._list, "Pod", namespace, ACTIVE_PODS, slim=True)
            pods = self._once(self._active, namespace, read).result()
        return [p for p in pods if pod_active(p)]

    def filed(self, kind: str, index: str, keys: Sequence[Hashable]) -> list[bool] | None:
        built = self._index(kind, index)
        if built is None:
            return None
        held = self._held.get(kind)
        found = built.filed(keys)
        return found if held is None else aside.filed(found, held, kind, index, keys)

    def unmatched(
        self, kind: str, index: str, other_kind: str, other_index: str
    ) -> list[Obj] | None:
        built, other = self._index(kind, index), self._index(other_kind, other_index)
        if built is None or other is None:
            return None
        held = self._held.get(other_kind)
        found = built.unmatched(other)
        return (
            found if held is None else aside.unmatched(found, held, kind, other_kind, other_index)
        )

    def count(self, kind: str, *, namespace: str | None = None) -> int | None:
        """How many objects of `kind` there are, those held aside included, when every
        namespace's were read holding the finished ones aside (else None: the caller lists)."""
        if self._whole(kind) is None:  # not read whole, or the read failed
            return None
        held = self._held.get(kind)
        if held is None:
            return None
        return len(self.objects(kind, namespace=namespace)) + held.aside_count(namespace)

    def _index(self, kind: str, index: str) -> Index | None:
        built = self._indexes.get((kind, index))
        if built is None:
            whole = self._whole(kind) if (kind, None) in self._lists else None
            if whole is None:
                return None
            built = self._indexes[(kind, index)] = Index(INDEXERS[(kind, index)], whole)
        return built

    def events_for(self, *, namespace: str, kind: str, name: str) -> list[Obj]:
        return events_for(self.client, namespace=namespace, kind=kind, name=name)

    # --- what the pods on each node request ----------------------------------------------

    def node_usage(self) -> Mapping[str, NodeUsage]:
        """Requests of non-terminated pods per node, read for the nodes asked about
        (`NodeUsageReads`), or from every pod when the cluster's pods were listed."""
        if self._usage is None:
            self._usage = NodeUsageReads(
                node_pods=self._pods_of,
                all_pods=self._active_pods,
                node_count=self._node_count,
                parallel=self._workers.map,
            )
        return self._usage

    def _pods_of(self, node: str) -> list[Obj]:
        """The active pods bound to `node`: one request (answered from the API server's
        per-node index). They also answer `get` for the pods on that node."""
        pods = self._list("Pod", None, f"spec.nodeName={node},{ACTIVE_PODS}")
        with self._lock:
            for p in pods:
                self._node_pods[(ns_of(p), name_of(p))] = p
        return pods

    def _active_pods(self) -> list[Obj]:
        """Every running pod, for the nodes' usage alone: decoded to what that is worked out
        from (`kube.decode.usage_decoder`), unless the sweep read every pod anyway."""
        whole = self._whole("Pod")
        if whole is not None:
            return whole
        return self._list("Pod", None, ACTIVE_PODS, decode=usage_decoder())

    def _node_count(self) -> int | None:
        nodes = self._whole("Node")
        return None if nodes is None else len(nodes)

    def close(self) -> None:
        """Close the connection and let go of what was read (a source and its usage refer
        to each other: only the cyclic GC would free them otherwise)."""
        self._workers.close()
        self.client.close()
        self._lists, self._named, self._node_pods, self._indexes = {}, {}, {}, {}
        self._active, self._held = {}, {}
        self._usage = None


def _owner_in(named: Named) -> Callable[[str, str, Any], Obj | None]:
    """A pod's Job among those `named` (read so far)."""

    def owner(kind: str, namespace: str, name: Any) -> Obj | None:
        if kind != "Job" or type(name) is not str:
            return None
        return filed_at(named, namespace, name)

    return owner


def _same(obj: Obj) -> Obj:
    return obj


def _done(items: list[Obj]) -> Future[list[Obj]]:
    done: Future[list[Obj]] = Future()
    done.set_result(items)
    return done
