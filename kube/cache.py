"""A watch-backed ClusterSource for a long-running bot: warm triages cost one API request.

`CachedSource` runs one `Informer` per kind the engine reads (all of `triage.cluster.source.KINDS`
except events) and an incremental `UsageIndex` over pods. Reads come from memory; only
`events_for` goes to the API server, because events are many, short-lived and wanted for one
object at a time. Kinds the credentials cannot list cluster-wide fall back to per-request
reads through a `LiveSource`, so narrow RBAC degrades speed, not answers. `ClusterRegistry`
holds one cache per kubeconfig context for a bot serving several clusters.
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading
import time
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from typing import TypeVar

from kube import aside
from kube.aside import Aside, finished_job, job_of_finished
from kube.client import RawClient, load_client
from kube.decode import TEMPLATED
from kube.fastjson import gc_paused
from kube.informer import Informer
from kube.lists import events_for, kind_type
from kube.live import LiveSource
from kube.share import Sharer
from kube.slim import projection
from triage.cluster.indexes import kept
from triage.cluster.objects import Obj, name_of, ns_of
from triage.cluster.source import (
    KINDS,
    SourceDefaults,
    SourceStatus,
    UnavailableError,
    filed_at,
)
from triage.cluster.usage import NodeUsage, UsageIndex

T = TypeVar("T")

CACHED_KINDS = tuple(k for k in KINDS if k != "Event")
# Owner kinds whose first stream the pods' first list waits for (see `CachedSource`).
_POD_OWNERS_FIRST = ("Job",)
MALLOC_ARENAS = 2  # `few_malloc_arenas`
_M_ARENA_MAX = -8  # glibc's malloc.h
log = logging.getLogger(__name__)


# starting: first list not done; forbidden: not listable, read per request; absent: no such API
STATES = ("starting", "synced", "failing", "forbidden", "absent")


@dataclass(frozen=True)
class KindHealth:
    """One cached kind as monitoring sees it."""

    kind: str
    state: str  # one of STATES
    objects: int
    down_seconds: float  # how long the watch has been down (0 when it is up)
    relists: int  # full relists after 410 Gone


STALE_AFTER = 30.0  # seconds a watch may be down before reports mention it


def few_malloc_arenas() -> bool:
    """Limits the C library's malloc arenas to `MALLOC_ARENAS` for this process, before its
    caches start (unless the environment sets `MALLOC_ARENA_MAX`, the operator's choice):
    whether it did. glibc gives each thread that allocates an arena of its own (up to eight
    per core) and keeps what is freed in it; a cache synced by list pages, whose pages are
    read on threads of their own, held 329-338 MB at 5,000 nodes, and 280 MB with two arenas
    (a sync no slower; streamed, 270 MB either way). A C library without `mallopt` (macOS)
    is left as it is."""
    if "MALLOC_ARENA_MAX" in os.environ:
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_ARENA_MAX, MALLOC_ARENAS))


class CachedSource(SourceDefaults):
    """ClusterSource served from watches. `start()`, optionally `wait_synced()`, then read.

    Thread-safe: any number of triages may read while the watch threads update.

    A Job's pods hold the Job's own name and uid strings (in their owner reference and in
    the labels the Job controller sets), not equal copies: 137 bytes less a pod of a batch
    cluster (`Sharer`'s `owner`). A pod's projection finds its Job cached, or among those
    the Jobs' list read so far (`Informer.listing`). While the Jobs are streamed (the
    watch-list protocol), the pods' first list starts once the Jobs' has ended (streamed or
    failed): on one core the two cost no more one after the other, where decoding both at
    once the two threads contend for the interpreter (a cold sync took more CPU so, not
    less); an API server slower to send the Jobs than this process is to decode them would
    make the two streams' times add up instead. Read by list pages, each of which waits on
    the server, the two lists are read at once (one after the other, a cold sync took twice
    as long with 50 ms a page).

    A pod that has succeeded and whose one owner is a Job is held aside (`Informer`'s
    `aside`, `kube.aside`): the cache keeps its name and its Job's, not the pod; so is a Job
    that has finished (completed or failed), by its name. Whether a Job has pods, or exists,
    is answered from the names (`filed`, `unmatched`, `count`); asked by name (`get`), or as
    one of its Job's pods (`indexed` by `POD_OWNER`), such an object is read from the API.
    """

    def __init__(
        self,
        client: RawClient,
        *,
        kinds: tuple[str, ...] = CACHED_KINDS,
        watch_timeout: float = 60.0,
        sync_timeout: float = 60.0,
        stale_after: float = STALE_AFTER,
        max_backoff: float = 30.0,
        freeze_gc: bool = True,
        watch_list: bool = True,
        on_synced: Callable[[CachedSource], object] | None = None,
    ) -> None:
        """`on_synced(source)` runs on a thread of its own once every kind has synced (a
        bot's warm-up: `triage.prepare`); what it raises is logged."""
        self.client = client
        self._on_synced = on_synced
        self._freeze_gc = freeze_gc
        self._closing = threading.Event()
        self.usage = UsageIndex()
        self._sync_timeout, self._stale_after = sync_timeout, stale_after
        made: dict[str, Informer] = {}
        holds: dict[str, Aside] = {"Pod": self._finished_of_job, "Job": finished_job}
        for kind in sorted(kinds, key=lambda k: k == "Pod"):  # the pods' last: see the class
            pods = kind == "Pod"
            made[kind] = Informer(
                client,
                KINDS[kind],
                watch_timeout=watch_timeout,
                max_backoff=max_backoff,
                freeze_gc=freeze_gc,
                watch_list=watch_list,
                on_change=self.usage.change if pods else None,
                on_replace=self.usage.replace if pods else None,
                project=self._projection(kind),
                after=[made[k] for k in _POD_OWNERS_FIRST if pods and k in made],
                file_as_read=kind in _POD_OWNERS_FIRST,
                aside=holds.get(kind),
            )
        self._informers = {kind: made[kind] for kind in kinds}
        self._started = False
        self._start_lock = threading.Lock()
        # Node health and other per-object work the engine remembers between triages.

    def _projection(self, kind: str) -> Callable[[Obj], Obj] | None:
        """What the cache keeps of each object of `kind` (None: the informer's default). The
        pods take their owners' strings; a new version of an owner (a Job's status, written
        after its pods'; a relist) takes the strings of the version cached, which its pods
        hold (`Sharer.earlier`)."""
        if kind == "Pod":
            return projection(kind, Sharer(owner=self._owner))
        if kind in TEMPLATED:
            return projection(kind, Sharer(owner=self._cached, kind=kind))
        return None

    def _cached(self, kind: str, namespace: str, name: object) -> Obj | None:
        """An object as cached (an earlier version of a Job), whose name and uid strings a
        projection takes (see the class)."""
        # (Built in order, the informers are all here before any starts. Its count, read
        # without the lock: an empty store, as in a first list, is not asked.)
        inf = self._informers.get(kind)
        if inf is None or not len(inf) or type(name) is not str:
            return None
        return inf.get(namespace, name)

    def _owner(self, kind: str, namespace: str, name: object) -> Obj | None:
        """A pod's owner as cached, or among those its kind's list read so far."""
        inf = self._informers.get(kind)
        if inf is None or type(name) is not str:
            return None
        found = inf.get(namespace, name) if len(inf) else None
        listing = inf.listing
        if found is None and listing is not None:
            found = filed_at(listing, namespace, name)
        return found

    def _finished_of_job(self, pod: Obj) -> str | None:
        """The name of the Job of a pod to hold aside (`job_of_finished`): the cached Job's
        own name string."""
        job = job_of_finished(pod)
        if job is None:
            return None
        ns = ns_of(pod)
        cached = self._owner("Job", ns, job)
        own = None if cached is None else name_of(cached)
        if own is None and "Job" in self._informers:  # a finished Job, held aside
            own = self._informers["Job"].aside_of(ns, job)
        return own if own == job else job

    def _read_held(self, inf: Informer) -> aside.ReadHeld:
        """Reads objects of `inf`'s kind held aside from the API (when called), projected as
        the cache's are."""

        def read(namespace: str, names: list[str]) -> list[Obj]:
            kind = inf.rt.kind
            get = partial(self._live().get, kind, namespace=namespace)
            project = self._projection(kind) or projection(kind)
            return aside.read_held(self.client, inf.rt, namespace, names, get=get, project=project)

        return read

    @property
    def cluster_name(self) -> str:
        return self.client.cluster_name

    def start(self) -> CachedSource:
        with self._start_lock:
            if not self._started:
                self._started = True
                for inf in self._informers.values():
                    inf.start()
                if self._on_synced is not None:
                    name = f"warm-up {self.cluster_name}"
                    threading.Thread(target=self._warm_up, name=name, daemon=True).start()
        return self

    def _warm_up(self) -> None:
        for inf in self._informers.values():
            while not inf.synced.wait(1.0):
                if self._closing.is_set():
                    return
        if self._closing.is_set() or self._on_synced is None:
            return
        started = time.monotonic()
        try:
            self.warm(self._on_synced)
        except Exception:  # a warm-up is an optimisation: the first triage does the work
            log.exception("cluster %s: warm-up after the sync failed", self.cluster_name)
            return
        log.info("cluster %s: warmed up in %.1fs", self.cluster_name, time.monotonic() - started)

    def warm(self, prepare: Callable[[CachedSource], T]) -> T:
        """`prepare(self)` with the cyclic GC paused, and what it built (the memo's node health,
        indexes, node classes: as long-lived as the cache) then frozen, as a list's objects
        are (see `kube.fastjson`). The warm-up after the sync runs through here."""
        with gc_paused(freeze=self._freeze_gc):
            return prepare(self)

    def wait_synced(self, timeout: float | None = None) -> bool:
        """True once every kind finished its first list (or is known absent/forbidden).

        Each informer freezes what its lists built out of the GC's generations (unless
        `freeze_gc=False`): see `kube.fastjson`.
        """
        deadline = time.monotonic() + (self._sync_timeout if timeout is None else timeout)
        for inf in self._informers.values():
            if not inf.synced.wait(max(0.0, deadline - time.monotonic())):
                return False
        return True

    def close(self) -> None:
        self._closing.set()
        for inf in self._informers.values():
            inf.stop(timeout=0)
        for inf in self._informers.values():
            inf.stop()
        self.client.close()

    # --- ClusterSource -------------------------------------------------------------------

    def _informer(self, kind: str) -> Informer | None:
        """The informer to read `kind` from, or None when reads must go to the API."""
        inf = self._informers.get(kind)
        if inf is not None and inf.state == "synced" and inf.synced.is_set():
            return inf  # the common case, on every read: no lock, no wait
        kind_type(kind)
        if inf is None:
            return None
        self.start()
        deadline = time.monotonic() + self._sync_timeout
        while not inf.synced.wait(0.05):
            if inf.error is not None:  # the first list failed: say why now, not after a wait
                raise inf.error
            if time.monotonic() > deadline:
                break
        if not inf.synced.is_set():
            raise UnavailableError(
                f"cluster {self.cluster_name}: {inf.rt.plural} not synced after "
                f"{self._sync_timeout:g}s"
            )
        if inf.state == "forbidden":
            return None
        return inf

    def _live(self) -> LiveSource:
        return LiveSource(self.client)

    def get(self, kind: str, name: str, *, namespace: str | None = None) -> Obj | None:
        inf = self._informer(kind)
        if inf is None:
            return self._live().get(kind, name, namespace=namespace)
        ns = (namespace or "") if inf.rt.namespaced else ""
        found = inf.get(ns, name)
        if found is None and inf.aside_of(ns, name) is not None:  # (see the class)
            return next(iter(self._read_held(inf)(ns, [name])), None)
        return found

    def objects(self, kind: str, *, namespace: str | None = None) -> list[Obj]:
        inf = self._informer(kind)
        if inf is None:
            return self._live().objects(kind, namespace=namespace)
        return inf.items(namespace if inf.rt.namespaced else None)

    def count(self, kind: str, *, namespace: str | None = None) -> int | None:
        inf = self._informer(kind)
        if inf is None:  # read from the API: the caller lists
            return None
        ns = namespace if inf.rt.namespaced else None
        return inf.count(ns) + inf.aside_count(ns)  # what it knows of (see the class)

    def events_for(self, *, namespace: str, kind: str, name: str) -> list[Obj]:
        return events_for(self.client, namespace=namespace, kind=kind, name=name)

    def indexed(self, kind: str, index: str, key: Hashable) -> list[Obj] | None:
        """Objects filed under `key` in an index of `triage.cluster.indexes`, kept current
        by the watch; None when `kind` is read from the API (the caller scans)."""
        inf = self._informer(kind)
        if inf is None or not kept(kind, index):
            return None
        return aside.indexed(inf.indexed(index, key), inf, kind, index, key, self._read_held(inf))

    def filed(self, kind: str, index: str, keys: Sequence[Hashable]) -> list[bool] | None:
        inf = self._informer(kind)
        if inf is None:
            return None
        return aside.filed(inf.filed(index, keys), inf, kind, index, keys)

    def unmatched(
        self, kind: str, index: str, other_kind: str, other_index: str
    ) -> list[Obj] | None:
        inf, other = self._informer(kind), self._informer(other_kind)
        if inf is None or other is None:
            return None
        found = inf.unmatched(index, other, other_index)
        return aside.unmatched(found, other, kind, other_kind, other_index)

    def node_usage(self) -> Mapping[str, NodeUsage]:
        if self._informer("Pod") is None:
            return self._live().node_usage()
        return self.usage.snapshot()

    # --- health --------------------------------------------------------------------------

    def staleness_note(self) -> str | None:
        """One line for a report when cached data may be behind the cluster, else None."""
        now = time.monotonic()
        behind = []
        for inf in self._informers.values():
            if inf.down_since is not None and inf.state != "forbidden":
                age = now - inf.down_since
                if age >= self._stale_after or not inf.synced.is_set():
                    behind.append((age, inf))
        if not behind:
            return None
        age, worst = max(behind, key=lambda pair: pair[0])
        kinds = ", ".join(sorted(inf.rt.plural for _, inf in behind))
        return (
            f"cluster data may be up to {int(age)}s old: lost the watch on {kinds} ({worst.error})"
        )

    def health(self) -> list[KindHealth]:
        """Per cached kind: state, objects held, how long its watch has been down, relists."""
        now = time.monotonic()
        return [
            KindHealth(
                kind=kind,
                state=inf.state,
                objects=len(inf),
                down_seconds=(
                    now - inf.down_since
                    if inf.down_since is not None and inf.state != "forbidden"
                    else 0.0
                ),
                relists=inf.relists,
            )
            for kind, inf in self._informers.items()
        ]

    def held_aside(self, kind: str = "Pod") -> int:
        """How many objects of `kind` the cache knows by name alone (see the class)."""
        inf = self._informers.get(kind)
        return 0 if inf is None else inf.aside_count()

    def status(self, *, watched: bool = False) -> SourceStatus:
        """Synced, still syncing, stale (a watch down for a while) or down (never synced)."""
        pending = [inf for inf in self._informers.values() if not inf.synced.is_set()]
        failed = next((inf for inf in pending if inf.error is not None), None)
        if failed is not None:
            state, detail = "down", str(failed.error)
        elif pending:
            state, detail = "syncing", f"listing {', '.join(i.rt.plural for i in pending[:3])}"
        else:
            note = self.staleness_note()
            state, detail = ("stale", note) if note else ("synced", "")
        return SourceStatus(
            name=self.cluster_name,
            state=state,
            nodes=len(self._informers["Node"]) if "Node" in self._informers else 0,
            pods=len(self._informers["Pod"]) + self.held_aside() if "Pod" in self._informers else 0,
            detail=detail,
            watched=watched,
        )

    def resource_version(self, kind: str) -> str:
        """How far the cache of `kind` has read the API: the last resourceVersion applied."""
        inf = self._informers.get(kind)
        return inf.resource_version if inf is not None else ""

    def stats(self) -> dict[str, int]:
        """Objects cached per kind, API requests and watches sent, relists after 410 Gone so
        far, and how many kinds last synced by the watch-list protocol (for the bench)."""
        out = {kind: len(inf) for kind, inf in self._informers.items()}
        out["pods_held_aside"] = self.held_aside("Pod")
        out["jobs_held_aside"] = self.held_aside("Job")
        out["api_requests"] = self.client.requests
        out["api_watches"] = self.client.watches
        out["relists"] = sum(inf.relists for inf in self._informers.values())
        out["synced_by_watch_list"] = sum(
            inf.protocol == "watch-list" for inf in self._informers.values()
        )
        return out


class ClusterRegistry:
    """One CachedSource per kubeconfig context: the `watch`ed ones started at once (the bot
    sweeps them for alerts), any other context of the kubeconfig on first use."""

    def __init__(
        self,
        *,
        kubeconfig: str | None = None,
        default: str | None = None,
        watch: list[str] | None = None,
        factory: Callable[[RawClient], CachedSource] = CachedSource,
    ) -> None:
        self._kubeconfig, self._factory = kubeconfig, factory
        self._default = default or (watch[0] if watch else None)
        self._watch = list(dict.fromkeys(watch or []))
        self._sources: dict[str, CachedSource] = {}
        self._lock = threading.Lock()
        for name in self._watch:  # a listed context that does not load is a startup error
            self.source(name)

    def source(self, name: str | None = None) -> CachedSource:
        """The cache for context `name` (the default / current context when None).

        Raises `kube.errors.ConfigError` for a context the kubeconfig does not define.
        """
        wanted = name or self._default
        with self._lock:
            if wanted is not None and wanted in self._sources:
                return self._sources[wanted]
            api, resolved = load_client(kubeconfig=self._kubeconfig, context=wanted)
            if resolved in self._sources:
                api.close()  # type: ignore[no-untyped-call]
                return self._sources[resolved]
            src = self._factory(RawClient(api, cluster_name=resolved)).start()
            self._sources[resolved] = src
            if self._default is None and name is None:
                self._default = resolved
            return src

    def names(self) -> list[str]:
        with self._lock:
            return sorted(self._sources)

    @property
    def default(self) -> str | None:
        return self._default

    def watched(self) -> list[str]:
        """The clusters swept for alerts: those listed, else the default one once started."""
        if self._watch:
            return list(self._watch)
        return [self._default] if self._default in self.sources() else []

    def statuses(self) -> list[SourceStatus]:
        """Every started cache's state: the watched ones in their configured order first."""
        order = {name: i for i, name in enumerate(self.watched())}  # as configured
        found = [src.status(watched=name in order) for name, src in self.sources().items()]
        return sorted(found, key=lambda c: (order.get(c.name, len(order)), c.name))

    def sources(self) -> dict[str, CachedSource]:
        """The caches started so far, by context name."""
        with self._lock:
            return dict(self._sources)

    def close(self) -> None:
        with self._lock:
            sources, self._sources = list(self._sources.values()), {}
        for src in sources:
            src.close()
