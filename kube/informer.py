"""List-then-watch for one kind, the way client-go informers keep a local copy current.

An `Informer` runs on its own thread: it lists (paginated, slimmed page by page), then watches
from the list's resourceVersion, applying ADDED/MODIFIED/DELETED to an in-memory store. A 410
Gone (expired resourceVersion) triggers a relist; any other failure reconnects with jittered
exponential backoff (`kube.backoff`: an outage must not end in every watch of every replica
reconnecting at the same instant) while the last known state keeps being served and its age
is reported.
Readers never block on the network: the store is a dict swapped or updated under a lock, and
stored objects are replaced, never mutated, so a reader may keep what it got.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Hashable, Sequence
from functools import partial
from typing import Literal, TypeVar

from kube.aside import Aside, Held, HeldAside, holding, kept
from kube.backoff import Backoff, watch_timeout
from kube.client import GoneError, RawClient
from kube.decode import event_decoder, list_decoder
from kube.fastjson import gc_paused, loads
from kube.lists import WatchListRefused, list_objects, stream_objects
from kube.slim import projection
from triage.cluster.indexes import BY_NAME, INDEXERS, Index
from triage.cluster.objects import Obj
from triage.cluster.source import (
    ForbiddenError,
    Named,
    ResourceType,
    SourceError,
    UnavailableError,
    by_namespace,
    filing,
    key,
)

log = logging.getLogger(__name__)

_NONE: dict[str, Obj] = {}  # what an unknown namespace holds (never written to)
_T = TypeVar("_T")
# Called with (old, new) under no lock of ours except the informer's own ordering guarantee:
# one informer thread calls it sequentially. `old`/`new` is None on add/delete. A relist
# reports a full replacement through `on_replace` instead.
OnChange = Callable[[Obj | None, Obj | None], None]
OnReplace = Callable[[list[Obj]], None]
State = Literal["starting", "synced", "forbidden", "absent", "failing"]

ABSENT_RECHECK = 300.0  # seconds before checking again whether a missing API got installed
FORBIDDEN_RECHECK = 120.0


class Informer:
    """Keeps one kind's objects current. `start()` it, then read `items()` / `get()`."""

    def __init__(
        self,
        client: RawClient,
        rt: ResourceType,
        *,
        on_change: OnChange | None = None,
        on_replace: OnReplace | None = None,
        watch_timeout: float = 60.0,
        max_backoff: float = 30.0,
        freeze_gc: bool = True,
        watch_list: bool = True,
        backoff: Backoff | None = None,
        project: Callable[[Obj], Obj] | None = None,
        after: Sequence[Informer] = (),
        file_as_read: bool = False,
        aside: Aside | None = None,
    ) -> None:
        """`project`: what the cache keeps of each object (`kube.slim.projection` of the kind
        by default). `after`: informers whose first list must have ended, listed or not, before
        this one's first list starts, while they read by streams (see `CachedSource`).
        `file_as_read`: while a list is read by pages, `listing` holds the objects read so far.
        `aside`: the objects to hold aside (`Aside`): `items`, `get` and the indexes leave
        them out, `aside_of` and `aside_names` name them, `aside_owned` says which strings
        some are held under; `on_change` sees one held aside as gone."""
        self.client, self.rt = client, rt
        # Sync by the watch-list protocol (kube.lists.stream_objects) until the server refuses
        # it once; then by paginated lists. `protocol` says which the last sync used.
        self.watch_list = watch_list
        self.protocol = ""
        self.freeze_gc = freeze_gc  # freeze the store and indexes once built (kube.fastjson)
        self._project = project or projection(rt.kind)
        self._aside = aside
        self._held = HeldAside()  # what is held aside, by namespace and name
        self._after = tuple(after)
        self._on_change, self._on_replace = on_change, on_replace
        self._watch_timeout = watch_timeout
        self.backoff = backoff or Backoff(first=min(0.5, max_backoff), cap=max_backoff)
        self._lock = threading.Lock()
        # The store: namespace ("" for cluster-scoped kinds), then name. Keyed by the name
        # string its object holds, not by a (namespace, name) tuple: 64 bytes less an object.
        self._by_ns: dict[str, dict[str, Obj]] = {}
        self._count = 0
        # The lists `items` handed out, by namespace (None: all), while nothing in them changed.
        self._lists: dict[str | None, list[Obj]] = {}
        # Indexes of triage.cluster.indexes, built on first use and kept current; while one
        # is being built off the lock, the changes meanwhile queue in `_catching_up`.
        self._indexes: dict[str, Index] = {}
        self._catching_up: dict[str, list[tuple[Obj | None, Obj | None]] | None] = {}
        self._index_lock = threading.Lock()
        self._rv = ""
        self.state: State = "starting"
        self.error: SourceError | None = None
        self.down_since: float | None = None  # monotonic time the watch last went down
        self.relists = 0
        self._listed = False  # a list ever succeeded
        self.synced = threading.Event()  # set once the first list settled (even as absent)
        self.tried = threading.Event()  # set once the first list was tried: listed, or failed
        # While a list is read by pages, with `file_as_read`: the objects read so far, by
        # namespace and name (changed by the informer's thread alone, which only adds to it).
        self.file_as_read = file_as_read
        self.listing: Named | None = None
        self._stop = threading.Event()
        self._shutdown: Callable[[], None] | None = None
        self._thread = threading.Thread(target=self._run, name=f"informer-{rt.plural}", daemon=True)

    # --- reading -------------------------------------------------------------------------

    def get(self, namespace: str, name: str) -> Obj | None:
        with self._lock:
            return self._by_ns.get(namespace, _NONE).get(name)

    def items(self, namespace: str | None = None) -> list[Obj]:
        """The objects (of `namespace`, or all). While none of them changes, every call gets
        the same list, so what was derived from it is known to hold without looking at the
        objects (`IdentityMemo.get_lists`): a reader must not change it."""
        with self._lock:
            found = self._lists.get(namespace)
            if found is None:
                found = self._lists[namespace] = (
                    self._all()
                    if namespace is None
                    else list(self._by_ns.get(namespace, _NONE).values())
                )
            return found

    def _all(self) -> list[Obj]:
        return [obj for held in self._by_ns.values() for obj in held.values()]

    def count(self, namespace: str | None = None) -> int:
        """How many objects `items` would hand out, without making its list (after a change,
        a list of every Job of a batch cluster: 565,000 at 20,000 nodes)."""
        with self._lock:
            return self._count if namespace is None else len(self._by_ns.get(namespace, _NONE))

    def __len__(self) -> int:
        return self._count

    def aside_of(self, namespace: str, name: str) -> str | None:
        """The string an object held aside is held under (None: none is held by this name)."""
        with self._lock:
            return self._held.aside_of(namespace, name)

    def aside_names(self, namespace: str, held_as: str) -> list[str]:
        """The names of the objects of `namespace` held aside under `held_as`."""
        with self._lock:
            return self._held.aside_names(namespace, held_as)

    def aside_owned(self, keys: Sequence[tuple[str, str]]) -> list[bool]:
        """For each (namespace, string), whether an object is held aside under it."""
        with self._lock:
            return self._held.aside_owned(keys)

    def aside_count(self, namespace: str | None = None) -> int:
        """How many objects (of `namespace`, or all) are held aside."""
        with self._lock:
            return self._held.aside_count(namespace)

    @property
    def resource_version(self) -> str:
        """The resourceVersion of the last list or change applied (or bookmark seen)."""
        return self._rv

    def indexed(self, index: str, key: object) -> list[Obj]:
        """The objects filed under `key` in `index` (one of `triage.cluster.indexes.INDEXERS`
        for this kind). The first call builds the index without holding up the watch;
        `BY_NAME` is the store itself."""
        if index == BY_NAME:
            found = self.get(*key) if type(key) is tuple and len(key) == 2 else None
            return [] if found is None else [found]
        return self._read_index(index, lambda built: built.get(key))

    def filed(self, index: str, keys: Sequence[Hashable]) -> list[bool]:
        """For each of `keys`, whether `indexed` files anything under it (one hold of the
        lock for them all)."""
        if index == BY_NAME:
            with self._lock:
                by_ns = self._by_ns
                return [
                    type(k) is tuple and len(k) == 2 and k[1] in by_ns.get(k[0], _NONE)
                    for k in keys
                ]
        return self._read_index(index, lambda built: built.filed(keys))

    def unmatched(self, index: str, other: Informer, other_index: str) -> list[Obj]:
        """`Index.unmatched` of this informer's `index` against `other`'s `other_index`, both
        read under their locks: this one's, then the other's (taken in that order only here,
        and no informer takes another's lock while holding its own otherwise). An index not
        built yet is built meanwhile, holding this lock (the bot's warm-up builds them first)."""
        return self._read_index(
            index, lambda built: other._read_index(other_index, built.unmatched)
        )

    def _read_index(self, index: str, read: Callable[[Index], _T]) -> _T:
        """`read` of the index, under the lock; the first call builds the index."""
        with self._lock:
            built = self._indexes.get(index)
            if built is not None:
                return read(built)
        with self._index_lock:  # one builder per informer
            while True:
                with self._lock:
                    built = self._indexes.get(index)
                    if built is not None:
                        return read(built)
                    items = self._all()
                    self._catching_up[index] = []
                with gc_paused(freeze=self.freeze_gc):  # as the store is (`_list`)
                    built = Index(INDEXERS[(self.rt.kind, index)], items)
                with self._lock:
                    pending = self._catching_up.pop(index)
                    if pending is None:
                        continue  # relisted meanwhile: build again from the new list
                    for old, new in pending:
                        built.update(old, new)
                    self._indexes[index] = built
                    return read(built)

    # --- lifecycle -----------------------------------------------------------------------

    def start(self) -> Informer:
        self._thread.start()
        return self

    def stop(self, *, timeout: float = 2.0) -> None:
        self._stop.set()
        shutdown = self._shutdown
        if shutdown is not None:
            with contextlib.suppress(OSError):
                shutdown()
        self._thread.join(timeout)

    def _run(self) -> None:
        backoff = self.backoff
        need_list = True
        for first in self._after:  # (only while it streams: see `CachedSource`)
            while first.watch_list and not first.tried.wait(0.2):
                if self._stop.is_set():
                    return
        while not self._stop.is_set():
            try:
                if need_list:
                    self._list()
                    need_list = False
                    if self.state == "absent":
                        self._stop.wait(ABSENT_RECHECK)
                        need_list = True
                        continue
                self._watch()
                backoff.reset()  # a watch that ended cleanly (server timeout): resume at once
            except GoneError:
                need_list = True
                self.relists += 1
            except ForbiddenError as e:
                need_list = True
                if not self._listed:  # never readable: readers go to the API per request
                    self._fail(e, state="forbidden")
                    self._stop.wait(FORBIDDEN_RECHECK)
                    continue
                self._fail(e, state="failing")  # e.g. list allowed but watch denied
                self._stop.wait(backoff.next())
            except SourceError as e:
                self._fail(e, state="failing")
                self._stop.wait(backoff.next())
            except Exception as e:  # never let one bad object kill the thread
                self._fail(
                    UnavailableError(f"watch on {self.rt.plural} failed: {e}"), state="failing"
                )
                need_list = True
                self._stop.wait(backoff.next())

    def _fail(self, e: SourceError, *, state: State) -> None:
        self.error = e
        self.tried.set()
        if self.down_since is None:
            self.down_since = time.monotonic()
        if state == "forbidden":
            self.state = "forbidden"
            self.synced.set()
        elif self.synced.is_set():
            self.state = "failing"

    def _healthy(self) -> None:
        self.error, self.down_since = None, None

    # --- list and watch ------------------------------------------------------------------

    def _list(self) -> None:
        # The collector stays off until the store and its indexes are built too, and all of it
        # is then frozen (kube.fastjson): a full collection would otherwise walk every cached
        # object, a pause of half a second at 600,000 pods, on whatever thread triggers it.
        with gc_paused(freeze=self.freeze_gc):
            self._replace()

    def _replace(self) -> None:
        aside: Held = {}
        try:
            items, rv, by_ns = self._initial(aside)
        except BaseException:
            self.listing = None
            raise
        held = HeldAside(aside)
        with self._lock:
            names = list(self._indexes)
        indexes = {name: Index(INDEXERS[(self.rt.kind, name)], items) for name in names}
        with self._lock:
            self._by_ns, self._rv = by_ns, rv
            self._held = held
            self.listing = None  # (its objects are the store's now)
            self._count = sum(len(held) for held in by_ns.values())
            self._lists = {}
            self._indexes = indexes  # one built meanwhile from the old list is dropped
            for name in self._catching_up:  # a build in progress starts again
                self._catching_up[name] = None
        if self._on_replace is not None:
            self._on_replace(items)
        self.state = "absent" if not rv else "synced"
        self._listed = True
        self._healthy()
        self.synced.set()
        self.tried.set()

    def _initial(self, aside: Held) -> tuple[list[Obj], str, Named]:
        """Every object, the resourceVersion to watch from, and the objects by namespace and
        name: streamed while the server serves the watch-list protocol, else listed page by
        page. The objects held aside are filed in `aside` instead."""
        if self.watch_list:
            try:
                items, rv = stream_objects(
                    self.client,
                    self.rt,
                    transform=holding(self._project, self._aside, aside),
                    decode=event_decoder(self.rt.kind, projected=True),
                )
            except WatchListRefused as e:
                log.info("%s: watch-list refused, listing instead: %s", self.rt.plural, e)
                self.watch_list = False
            else:
                self.protocol = "watch-list"
                items = kept(items, aside)
                return items, rv, by_namespace(items)
        self.protocol = "list"
        aside.clear()  # (of a stream that was refused)
        filed, project = self._filing()

        def restarted() -> None:
            aside.clear()
            if filed is not None:
                filed.clear()

        items, rv = list_objects(
            self.client,
            self.rt,
            transform=holding(project, self._aside, aside),
            decode=list_decoder(self.rt.kind, projected=True),
            restarted=restarted,
        )
        items = kept(items, aside)
        return items, rv, by_namespace(items) if filed is None else filed

    def _filing(self) -> tuple[Named | None, Callable[[Obj], Obj]]:
        """The projection of a list's objects; with `file_as_read`, one that also files each
        in a new `listing` (what the list read so far, for other informers' projections).
        Not of a stream's: those who would read it wait for it to end (`after`), and filing
        each object as it comes cost 1% more than filing them all after (the allocator's
        pages interleaved)."""
        if not self.file_as_read:
            return None, self._project
        filed: Named = {}
        self.listing = filed
        return filed, partial(filing, filed, self._project)

    def _watch(self) -> None:
        query = [
            ("watch", "1"),
            ("resourceVersion", self._rv),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(int(watch_timeout(self._watch_timeout, self.backoff.rng)))),
        ]
        read_timeout = 2 * self._watch_timeout + 15
        with self.client.watch_lines(self.rt, query=query, read_timeout=read_timeout) as (
            lines,
            shutdown,
        ):
            self._shutdown = shutdown
            self.state = "synced"
            self._healthy()
            decode = event_decoder(self.rt.kind, projected=True)
            try:
                for line in lines:
                    if self._stop.is_set():
                        return
                    event = decode(line)
                    if decode is not loads and event.get("type") not in _OBJECT_EVENTS:
                        event = loads(line)  # a bookmark, or an error's Status: read whole
                    self._apply(event)
            finally:
                self._shutdown = None

    def _apply(self, event: Obj) -> None:
        etype, obj = event.get("type"), event.get("object") or {}
        if etype == "ERROR":
            if obj.get("code") == 410:
                raise GoneError(f"{self.rt.plural}: {obj.get('message', '410 Gone')}")
            raise UnavailableError(f"watch on {self.rt.plural} failed: {obj.get('message')}")
        rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        if etype == "BOOKMARK":
            self._rv = rv or self._rv
            return
        obj["kind"], obj["apiVersion"] = self.rt.kind, self.rt.api_version
        held_as = None if self._aside is None or etype == "DELETED" else self._aside(obj)
        if held_as is not None:
            self._hold_aside(obj, held_as, rv)
            return
        new = self._project(obj)
        ns, name = key(new)
        with self._lock:
            held = self._by_ns.get(ns)
            old = None if held is None else held.get(name)
            if self._held.unhold(ns, name) and etype == "DELETED":
                self._rv = rv or self._rv  # (it was not in the store)
                return
            if etype == "MODIFIED" and old is not None and _unchanged(old, new):
                # A heartbeat, or a status write of something the cache does not keep: the
                # stored object stays, so everything remembered by its identity stays valid.
                self._rv = rv or self._rv
                return
            new_value = None if etype == "DELETED" else new
            self._store(ns, name, old, new_value)
            self._rv = rv or self._rv
        if self._on_change is not None:
            self._on_change(old, new_value)

    def _store(self, ns: str, name: str, old: Obj | None, new: Obj | None) -> None:
        """Puts `new` (None: nothing) in place of `old` (None: nothing) in the store, its
        lists and indexes; under the lock."""
        held = self._by_ns.get(ns)
        if new is None:
            if old is not None and held is not None:
                del held[name]
                self._count -= 1
                if not held:
                    del self._by_ns[ns]
        else:
            if held is None:
                held = self._by_ns[ns] = {}
            if old is None:
                self._count += 1
            held[name] = new
        self._lists.pop(ns, None)
        self._lists.pop(None, None)
        for built in self._indexes.values():
            built.update(old, new)
        for pending in self._catching_up.values():
            if pending is not None:
                pending.append((old, new))

    def _hold_aside(self, obj: Obj, held_as: str, rv: str) -> None:
        """Holds `obj` aside, in place of the object of its name the store held (gone from
        it, for `on_change`)."""
        ns, name = key(obj)
        with self._lock:
            held = self._by_ns.get(ns)
            old = None if held is None else held.get(name)
            if old is not None:
                self._store(ns, name, old, None)
            self._held.hold(ns, name, held_as)
            self._rv = rv or self._rv
        if old is not None and self._on_change is not None:
            self._on_change(old, None)


# Watch events that carry an object of the watched kind: decoded as list pages are (only what
# the projection keeps), so a pod a watch adds shares its spec with its workload's pods listed
# before it (decoded whole, its spec would be looked up by its containers' mounts of its own
# token: a spec of its own for every pod added after the first sync).
_OBJECT_EVENTS = ("ADDED", "MODIFIED", "DELETED")


def _unchanged(old: Obj, new: Obj) -> bool:
    """Equal but for metadata.resourceVersion."""
    if old.keys() != new.keys():
        return False
    for k, v in new.items():
        if k != "metadata":
            if old[k] != v:
                return False
            continue
        m_old, m_new = old[k] or {}, v or {}
        if m_old.keys() - {"resourceVersion"} != m_new.keys() - {"resourceVersion"}:
            return False
        if any(m_old.get(f) != x for f, x in m_new.items() if f != "resourceVersion"):
            return False
    return True
