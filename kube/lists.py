"""Reading lists of objects from the API server: paginated lists, watch-list streams, and
the events about one object.

`list_objects` pages through a list as client-go's pager does (starting over when a continue
token expires); `stream_objects` reads the same by the watch-list protocol, for the cache's
first sync; `events_for` is the one request a warm triage sends. Both the live source (one
command's reads) and the informers (the bot's cache) read through these.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import suppress
from functools import partial
from typing import Any, TypeVar

from kube.client import BUILTIN_GROUPS, GoneError, RawClient
from kube.decode import list_decoder
from kube.fastjson import gc_paused, loads
from triage.cluster.objects import Obj
from triage.cluster.source import (
    ALL_KINDS,
    KINDS,
    ForbiddenError,
    ResourceType,
    SourceError,
    UnavailableError,
)

T = TypeVar("T")
A = TypeVar("A")
PAGE_SIZE = 500
RELISTS = 3  # times a paginated list starts over when its continue token expires
# A list of every namespace's objects that would take this many pages or more may be read one
# namespace at a time, SPLIT_WIDTH namespaces at once (`list_objects`).
SPLIT_PAGES = 8
SPLIT_WIDTH = 4
SPLIT_AFTER = 3  # pages over which to see whether the round trips set a list's pace
SPLIT_BUSY = 0.8  # ... which they do not while the process keeps this much of a core busy


def kind_type(kind: str) -> ResourceType:
    rt = ALL_KINDS.get(kind)
    if rt is None:
        raise ValueError(f"unknown kind {kind!r}")
    return rt


def list_objects(
    client: RawClient,
    rt: ResourceType,
    *,
    namespace: str | None = None,
    field_selector: str | None = None,
    page_size: int = PAGE_SIZE,
    transform: Callable[[Obj], Obj] | None = None,
    decode: Callable[[bytes], Any] | None = None,
    restarted: Callable[[], None] | None = None,
    namespaces: Callable[[], Sequence[str] | None] | None = None,
) -> tuple[list[Obj], str]:
    """All items (each with `kind` and `apiVersion` set) and the list's resourceVersion.

    Follows `continue` tokens; when one expires (410 Gone: the list took longer than the
    server keeps its snapshot), starts over from the first page, up to RELISTS times, as
    client-go's pager does. A custom resource whose API is not installed lists as empty
    with resourceVersion "". `transform` is applied page by page (the cache slims objects
    before the next page arrives, so a full list never sits in memory); `decode` parses
    each page (`kube.slim.list_decoder`: only the fields `transform` reads). `restarted` is
    called before the list starts over (what `transform` kept of the pages read is stale).

    `namespaces` (a command's read of every pod or Job) gives the cluster's namespaces, or
    None. A list of every namespace's objects has one page in flight at a time, each a round
    trip: from far away, the 1,200 pages of pods of 20,000 nodes take minutes. When the
    round trips, not the work, set the pace (`_pages`), the list has SPLIT_PAGES pages or
    more to go, and the cluster no more than two namespaces a page, the pages read are
    dropped and the list is read one namespace at a time, SPLIT_WIDTH at once, and kept in
    the order the API server lists every namespace's (`_split`). Such a list has no one
    resourceVersion: it returns "".
    """
    for attempt in range(RELISTS + 1):
        if attempt and restarted is not None:
            restarted()
        try:
            return _pages(
                client, rt, namespace=namespace, field_selector=field_selector,
                page_size=page_size, transform=transform, decode=decode,
                restarted=restarted, namespaces=namespaces if namespace is None else None,
            )  # fmt: skip
        except GoneError:
            if attempt == RELISTS:
                raise
    raise AssertionError("unreachable")


def _pages(
    client: RawClient,
    rt: ResourceType,
    *,
    namespace: str | None,
    field_selector: str | None,
    page_size: int,
    transform: Callable[[Obj], Obj] | None,
    decode: Callable[[bytes], Any] | None,
    restarted: Callable[[], None] | None = None,
    namespaces: Callable[[], Sequence[str] | None] | None = None,
) -> tuple[list[Obj], str]:
    def page(token: str, namespace: str | None = namespace) -> dict[str, Any] | None:
        query = [("limit", str(page_size))]
        if token:
            query.append(("continue", token))
        if field_selector:
            query.append(("fieldSelector", field_selector))
        return client.get_json(rt, verb="list", namespace=namespace, query=query, decode=decode)

    items: list[Obj] = []
    # Over the last SPLIT_AFTER pages: seconds this thread waited for them and took them in,
    # and when they began by the process's CPU time and the clock.
    waited = took = 0.0
    cpu = wall = 0.0
    with gc_paused():  # the whole list: see kube.fastjson
        body = page("")
        pages = 0
        while True:
            page_items = _items(client, rt, body, namespace)
            if page_items is None:
                return [], ""
            meta: dict[str, Any] = body.get("metadata") or {}  # type: ignore[union-attr]
            token = str(meta.get("continue") or "")
            # The next page is asked for while this one is taken in: the API server (and the
            # network) work meanwhile, not after. One page waits at most.
            ahead = _background(page, token) if token else None
            pages += 1
            started = time.perf_counter()
            for item in page_items:
                items.append(transform(item) if transform else item)
            took += time.perf_counter() - started
            if ahead is None:
                return items, str(meta.get("resourceVersion") or "")
            # Split when the round trips set the pace: over the last few pages, this thread
            # waited for them longer than it took them in, while the process left a core
            # idle (not the command's other lists keeping it busy: reading by namespace would
            # not help then). The first page is left out: it also waits for the connection.
            if pages % SPLIT_AFTER == 1:
                if pages > 1 and namespaces is not None and waited > took:
                    busy = (time.process_time() - cpu) / (time.perf_counter() - wall)
                    order = None
                    if busy < SPLIT_BUSY:
                        order = _split_order(
                            client, rt, field_selector, page_size, namespaces, meta, len(items)
                        )
                        namespaces = None  # asked once
                    if order is not None:  # what was taken in is dropped, read by namespace
                        client.note_listed(rt.plural, -len(items))
                        if restarted is not None:
                            restarted()
                        del body, page_items, items, ahead  # not held while they are read
                        return _split(client, rt, order, page, transform=transform)
                waited = took = 0.0
                cpu, wall = time.process_time(), time.perf_counter()
            started = time.perf_counter()
            body = ahead.result()
            waited += time.perf_counter() - started


def _items(
    client: RawClient, rt: ResourceType, body: dict[str, Any] | None, namespace: str | None
) -> list[Obj] | None:
    """A list page's items, each with its kind and apiVersion set; None when the kind is not
    served (a custom resource whose API is not installed)."""
    if body is None:
        if rt.group in BUILTIN_GROUPS:
            raise UnavailableError(
                f"the Kubernetes API at {client.server} does not serve {rt.plural}",
                verb="list", resource=rt.plural, namespace=namespace,
            )  # fmt: skip
        return None
    page_items: list[Obj] = body.get("items") or []
    client.note_listed(rt.plural, len(page_items))
    for item in page_items:
        item["kind"] = rt.kind
        item["apiVersion"] = rt.api_version
    return page_items


def _split_order(
    client: RawClient,
    rt: ResourceType,
    field_selector: str | None,
    page_size: int,
    namespaces: Callable[[], Sequence[str] | None],
    meta: dict[str, Any],
    read: int,
) -> list[str] | None:
    """The namespaces to read a list of every namespace's objects by, in the order the API
    server lists them; None to read it whole. `meta` is the metadata of the page read last,
    `read` how many objects were read so far (dropped if it splits). Worth it for a list
    with SPLIT_PAGES pages or more to go, and more to go than were read. A list with a field
    selector does not say how long it is: one page of one object of the whole kind says how
    long that is (read at once with the namespaces)."""
    remaining = meta.get("remainingItemCount")
    names = None
    try:
        if field_selector:
            names = _background(lambda _: namespaces(), None)
            probe = client.get_json(rt, verb="list", query=[("limit", "1")])
            whole = ((probe or {}).get("metadata") or {}).get("remainingItemCount")
            remaining = whole - read if type(whole) is int else None
        if type(remaining) is not int or remaining < max(read, SPLIT_PAGES * page_size):
            return None
        listed = namespaces() if names is None else names.result()
    except SourceError:  # the list goes on whole, and says whatever stops it
        return None
    if listed is None or not 2 <= len(listed) <= 2 * ((remaining + read) // page_size + 1):
        return None
    # Stored under "<namespace>/<name>": "a-b/x" comes before "a/x".
    return sorted(listed, key=lambda n: f"{n}/")


_END = object()  # a namespace's last page was read


def _split(
    client: RawClient,
    rt: ResourceType,
    order: Sequence[str],
    page: Callable[[str, str | None], dict[str, Any] | None],
    *,
    transform: Callable[[Obj], Obj] | None,
) -> tuple[list[Obj], str]:
    """Every namespace's objects, read by namespace (`page(token, namespace)` reads one page)
    and returned in `order`: SPLIT_WIDTH namespaces' lists are read at once, each on a thread
    of its own, and their pages are taken in on this thread as they come, whichever
    namespace's. One page waits to be taken in, and one more per namespace being read."""
    stop = threading.Event()
    arrived: queue.Queue[tuple[int, Any]] = queue.Queue(maxsize=1)
    parts: list[list[Obj]] = [[] for _ in order]
    started = 0

    def start_next() -> int:
        nonlocal started
        if started == len(order):
            return 0
        i, started = started, started + 1
        namespace = order[i]
        read = partial(_read_namespace, lambda token: page(token, namespace), i, arrived, stop)
        threading.Thread(target=read, name="list-split", daemon=True).start()
        return 1

    reading = sum(start_next() for _ in range(SPLIT_WIDTH))
    try:
        while reading:
            i, got = arrived.get()
            if got is _END:
                reading += start_next() - 1
            elif isinstance(got, BaseException):
                raise got
            else:
                part = parts[i]
                for item in _items(client, rt, got, order[i]) or ():
                    part.append(transform(item) if transform else item)
    finally:
        stop.set()
    return [item for part in parts for item in part], ""


def _read_namespace(
    read: Callable[[str], dict[str, Any] | None],
    i: int,
    arrived: queue.Queue[tuple[int, Any]],
    stop: threading.Event,
) -> None:
    """Every page of namespace `i`'s list into `arrived`, then _END (or what the read
    raised), unless `stop` is set first."""

    def put(got: Any) -> bool:
        while not stop.is_set():
            with suppress(queue.Full):
                arrived.put((i, got), timeout=0.25)
                return True
        return False

    token = ""
    try:
        while True:
            body = read(token)
            token = str(((body or {}).get("metadata") or {}).get("continue") or "")
            if not put(body):
                return
            if not token:
                break
        put(_END)
    except BaseException as e:  # handed to the reader
        put(e)


def _background(read: Callable[[A], T], arg: A) -> Future[T]:
    """`read(arg)` on a thread of its own (a daemon: a command that gives up does not wait
    for it); its result, or what it raised, in the future."""
    done: Future[T] = Future()

    def run() -> None:
        try:
            done.set_result(read(arg))
        except BaseException as e:  # handed to the caller
            done.set_exception(e)

    threading.Thread(target=run, name="next-page", daemon=True).start()
    return done


INITIAL_EVENTS_END = "k8s.io/initial-events-end"  # the annotation ending a watch-list stream
WATCH_LIST_TIMEOUT = 900  # seconds the initial events of the largest cluster may take
# Seconds without a byte before the initial-events-end bookmark: a server streams the initial
# events without pause, so silence means it ignored the parameters (a plain watch, waiting for
# changes) and will never send the bookmark.
WATCH_LIST_IDLE = 60
# Bytes of added objects' events a stream reads before it decodes them. The cache's informers
# stream their kinds at once, a thread each: decoding each event as it came, between reads of
# the socket, the pods' and the Jobs' threads handed the interpreter's lock to each other far
# more often, and their cold sync cost a fifth more CPU than one kind after the other.
STREAM_BATCH = 256 * 1024


class WatchListRefused(UnavailableError):
    """The server did not serve the watch-list protocol: list instead."""


def stream_objects(
    client: RawClient,
    rt: ResourceType,
    *,
    transform: Callable[[Obj], Obj] | None = None,
    decode: Callable[[bytes], Any] | None = None,
) -> tuple[list[Obj], str]:
    """`list_objects` by the watch-list protocol (KEP-3157, on by default from Kubernetes
    1.32): one watch with `sendInitialEvents` streams every object as an ADDED event, then a
    bookmark annotated `k8s.io/initial-events-end` carries the resourceVersion to watch from.
    The API server answers it from its watch cache, with no list pages to assemble.

    Raises WatchListRefused when the server refuses the request (the feature is off, or the
    server predates it: 400 or 422), or ends the stream or falls silent for WATCH_LIST_IDLE
    seconds before that bookmark (a server that ignores the parameters streams every object
    but never says the state is complete).
    """
    query = [
        ("watch", "1"),
        ("sendInitialEvents", "true"),
        ("resourceVersionMatch", "NotOlderThan"),
        ("allowWatchBookmarks", "true"),
        ("timeoutSeconds", str(WATCH_LIST_TIMEOUT)),
    ]
    parse = decode or loads
    items: list[Obj] = []
    opened = False
    with gc_paused():  # the whole list: see kube.fastjson
        try:
            stream = client.watch_lines(rt, query=query, read_timeout=WATCH_LIST_IDLE)
            with stream as (lines, shutdown):
                opened = True
                for line in _batched(lines):
                    event = parse(line)
                    etype, obj = event.get("type"), event.get("object") or {}
                    if etype == "ADDED":
                        obj["kind"], obj["apiVersion"] = rt.kind, rt.api_version
                        items.append(transform(obj) if transform else obj)
                        continue
                    if decode is not None:  # a typed decoder keeps only what slim objects hold
                        event = loads(line)
                        etype, obj = event.get("type"), event.get("object") or {}
                    meta = obj.get("metadata") or {}
                    if (
                        etype == "BOOKMARK"
                        and (meta.get("annotations") or {}).get(INITIAL_EVENTS_END) == "true"
                    ):
                        shutdown()  # the informer watches on from the bookmark
                        return items, str(meta.get("resourceVersion") or "")
                    if etype == "ERROR":
                        raise WatchListRefused(f"{rt.plural}: {obj.get('message')}")
        except WatchListRefused:
            raise
        except (ForbiddenError, UnavailableError) as e:
            # Refused: the feature is off or unknown (400, 422), the kind is not served (404,
            # the list says so), or watching is not allowed where listing may be. A server
            # that cannot be reached is not a refusal: the caller retries as it would a list.
            status = getattr(e.__cause__, "status", None)
            if isinstance(e, ForbiddenError) or status in (400, 404, 422):
                raise WatchListRefused(str(e)) from e
            if opened:  # accepted, then silence or a cut: no bookmark is coming
                raise WatchListRefused(
                    f"{rt.plural}: no initial-events-end bookmark after {len(items)} objects"
                ) from e
            raise
    raise WatchListRefused(f"{rt.plural}: the stream ended before its initial-events-end bookmark")


def _batched(lines: Iterator[bytes]) -> Iterator[bytes]:
    """`lines` as they come, each added object's event held until STREAM_BATCH bytes of them
    are (every other event, a bookmark first, lets the held ones go at once: nothing may wait
    for bytes that do not come). What was held when the stream fails goes before the error."""
    held: list[bytes] = []
    size = 0
    try:
        for line in lines:
            if b'"ADDED"' not in line[:32]:
                yield from held
                held, size = [], 0
                yield line
                continue
            held.append(line)
            size += len(line)
            if size >= STREAM_BATCH:
                yield from held
                held, size = [], 0
    except Exception:
        yield from held
        raise
    yield from held


def events_for(client: RawClient, *, namespace: str, kind: str, name: str) -> list[Obj]:
    """One request: core/v1 events in the namespace about the named object."""
    rt = KINDS["Event"]
    selector = f"involvedObject.kind={kind},involvedObject.name={name}"
    body = client.get_json(
        rt,
        verb="list",
        namespace=namespace,
        query=[("fieldSelector", selector)],
        decode=list_decoder("Event"),
    )
    items = list((body or {}).get("items") or [])
    for item in items:
        item["kind"] = "Event"
        item["apiVersion"] = rt.api_version
    return items
