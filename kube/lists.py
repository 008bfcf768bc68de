"""Reading lists of objects from the API server: paginated lists, watch-list streams, and
the events about one object.

`list_objects` pages through a list as client-go's pager does (starting over when a continue
token expires); `stream_objects` reads the same by the watch-list protocol, for the cache's
first sync; `events_for` is the one request a warm triage sends. Both the live source (one
command's reads) and the informers (the bot's cache) read through these.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
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
    UnavailableError,
)

T = TypeVar("T")
PAGE_SIZE = 500
RELISTS = 3  # times a paginated list starts over when its continue token expires


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
) -> tuple[list[Obj], str]:
    """All items (each with `kind` and `apiVersion` set) and the list's resourceVersion.

    Follows `continue` tokens; when one expires (410 Gone: the list took longer than the
    server keeps its snapshot), starts over from the first page, up to RELISTS times, as
    client-go's pager does. A custom resource whose API is not installed lists as empty
    with resourceVersion "". `transform` is applied page by page (the cache slims objects
    before the next page arrives, so a full list never sits in memory); `decode` parses
    each page (`kube.slim.list_decoder`: only the fields `transform` reads). `restarted` is
    called before the list starts over (what `transform` kept of the pages read is stale).
    """
    for attempt in range(RELISTS + 1):
        if attempt and restarted is not None:
            restarted()
        try:
            return _pages(
                client, rt, namespace=namespace, field_selector=field_selector,
                page_size=page_size, transform=transform, decode=decode,
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
) -> tuple[list[Obj], str]:
    def page(token: str) -> dict[str, Any] | None:
        query = [("limit", str(page_size))]
        if token:
            query.append(("continue", token))
        if field_selector:
            query.append(("fieldSelector", field_selector))
        return client.get_json(rt, verb="list", namespace=namespace, query=query, decode=decode)

    items: list[Obj] = []
    with gc_paused():  # the whole list: see kube.fastjson
        body = page("")
        while True:
            if body is None:
                if rt.group in BUILTIN_GROUPS:
                    raise UnavailableError(
                        f"the Kubernetes API at {client.server} does not serve {rt.plural}",
                        verb="list", resource=rt.plural, namespace=namespace,
                    )  # fmt: skip
                return [], ""
            meta: dict[str, Any] = body.get("metadata") or {}
            token = str(meta.get("continue") or "")
            # The next page is asked for while this one is taken in: the API server (and the
            # network) work meanwhile, not after. One page waits at most.
            ahead = _background(page, token) if token else None
            page_items = body.get("items") or []
            client.note_listed(rt.plural, len(page_items))
            for item in page_items:
                item["kind"] = rt.kind
                item["apiVersion"] = rt.api_version
                items.append(transform(item) if transform else item)
            if ahead is None:
                return items, str(meta.get("resourceVersion") or "")
            body = ahead.result()


def _background(read: Callable[[str], T], arg: str) -> Future[T]:
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
