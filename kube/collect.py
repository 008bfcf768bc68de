"""Collects a snapshot of a live cluster: exactly the kinds the engine reads, redacted.

`gpu-triage snapshot` replaces a `kubectl get` recipe that always lagged behind the engine:
the kinds come from `triage.cluster.kinds` (the table the engine, the live source and the
chart's RBAC share), the requests go through the same client as every live read (`RawClient`:
retries, a deadline, our errors), and what could not be read is recorded, not papered over:
the manifest (`triage.cluster.coverage`) says per kind whether it was collected, how many
objects, or why not (forbidden, a server error), so a triage of the snapshot says what it
could not judge instead of judging on nothing.

With namespaces given, the kinds a triage reads only in its own namespace are collected in
those; the kinds it reads everywhere (`ACROSS_NAMESPACES`: the pods on every node decide
what is free on it) are collected in every namespace, pods there only while they run.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import quote

import orjson

from kube.client import RawClient
from kube.lists import PAGE_SIZE, list_objects
from kube.live import ACTIVE_PODS
from kube.redact import Redactions, redact, scrub
from kube.transport import Read, mapped, send
from triage.cluster.coverage import ACROSS_NAMESPACES, KindRecord, Manifest
from triage.cluster.kinds import KINDS, NAMED
from triage.cluster.objects import Obj
from triage.cluster.source import ForbiddenError, ReadFailedError

LOG_LINES = 500  # the tail of each log
LOG_BYTES = 256 * 1024  # and at most this much of it
MAX_LOGS = 40  # container logs per snapshot (current and previous count apart)


@dataclass
class Log:
    """One container log collected: where it goes in the snapshot, and what it is."""

    namespace: str
    pod: str
    container: str
    previous: bool
    text: bytes = b""
    error: str = ""

    @property
    def path(self) -> str:
        suffix = ".previous.log" if self.previous else ".log"
        return f"logs/{self.namespace}/{self.pod}/{self.container}{suffix}"


@dataclass
class Collected:
    """A snapshot in memory: the objects by kind, each as it stands in its kind's List file
    (`item_json`: a pod decoded whole costs six times its JSON), their manifest, and logs if
    asked."""

    objects: dict[str, list[bytes]]
    manifest: Manifest
    logs: list[Log] = field(default_factory=list)
    redactions: Redactions = field(default_factory=Redactions)
    noted: list[tuple[str, object]] = field(default_factory=list)  # (kind, what `seen` kept)


# A kind's List file, as `orjson.dumps({"apiVersion": "v1", "kind": "List", "metadata": {},
# "items": [...]}, option=OPT_INDENT_2)` writes it, made of its items' `item_json`.
LIST_HEAD = b'{\n  "apiVersion": "v1",\n  "kind": "List",\n  "metadata": {},\n  "items": [\n'
LIST_SEPARATOR = b",\n"
LIST_TAIL = b"\n  ]\n}"


def item_json(obj: Obj) -> bytes:
    """`obj` as one of the items of a List file: indented two spaces a level, at depth two
    (JSON strings hold no raw newline, so every newline is the layout's)."""
    return b"    " + orjson.dumps(obj, option=orjson.OPT_INDENT_2).replace(b"\n", b"\n    ")


def collect(
    client: RawClient,
    *,
    namespaces: Sequence[str] | None,
    tool: str,
    page_size: int = PAGE_SIZE,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    seen: Callable[[str, Obj], object] | None = None,
) -> Collected:
    """Every kind the engine reads (`namespaces`: these only, where the engine reads them per
    namespace; None: all), redacted. A kind that cannot be read is recorded as not collected
    with why; the first read (Nodes) failing for another reason than RBAC ends the command:
    the cluster cannot be read at all.

    Each object is redacted and kept as its JSON as soon as its page arrives: a snapshot of
    1,000 nodes held 1.8 GB of decoded objects at once. `seen(kind, obj)` is shown each,
    redacted; what it returns (None: nothing) is kept in `noted`. What was redacted, and what
    `seen` returned, count only for the objects of a kind collected (not for a list started
    again after `410 Gone`, nor for a kind whose next namespace or named object could not be
    read)."""
    redactions = Redactions()
    objects: dict[str, list[bytes]] = {}
    records: dict[str, KindRecord] = {}
    noted: list[tuple[str, object]] = []
    order = ["Node", *(k for k in KINDS if k != "Node")]
    for i, kind in enumerate(order):
        try:
            items, installed = _list(
                client, kind, namespaces=namespaces, page_size=page_size,
                transform=_keeper(kind, seen),
            )  # fmt: skip
        except ForbiddenError as e:
            records[kind] = KindRecord(collected=False, reason=f"forbidden: {e}")
            continue
        except ReadFailedError as e:
            if i == 0:
                raise
            records[kind] = KindRecord(collected=False, reason=f"{e.fault}: {e}")
            continue
        objects[kind] = _taken(kind, items, redactions, noted)
        records[kind] = KindRecord(collected=True, objects=len(items), installed=installed)
    for kind, (rt, namespace, names) in NAMED.items():
        keep = _keeper(kind, seen)
        found: list[Obj] = []
        try:
            for name in names:
                obj = client.get_json(rt, verb="get", namespace=namespace, name=name)
                if obj is not None:
                    obj.setdefault("kind", rt.kind)
                    obj.setdefault("apiVersion", rt.api_version)
                    found.append(keep(obj))
        except ReadFailedError as e:
            records[kind] = KindRecord(collected=False, reason=f"{e.fault}: {e}")
            continue
        objects[kind] = _taken(kind, found, redactions, noted)
        records[kind] = KindRecord(collected=True, objects=len(found))
    manifest = Manifest(
        cluster=client.cluster_name,
        taken_at=now().strftime("%Y-%m-%dT%H:%M:%SZ"),
        tool=tool,
        namespaces=tuple(sorted(set(namespaces))) if namespaces is not None else None,
        kinds=records,
    )
    return Collected(objects=objects, manifest=manifest, redactions=redactions, noted=noted)


def _taken(
    kind: str, items: list[Obj], redactions: Redactions, noted: list[tuple[str, object]]
) -> list[bytes]:
    """The JSON of a kind's kept objects (`_keeper`), once it is collected; what was redacted
    of them, and what `seen` returned, added to the snapshot's."""
    for item in items:
        if item["redacted"] is not None:
            redactions.add(item["redacted"])
        if item["noted"] is not None:
            noted.append((kind, item["noted"]))
    return [item["json"] for item in items]


def _keeper(kind: str, seen: Callable[[str, Obj], object] | None) -> Callable[[Obj], Obj]:
    """What is kept of each object of `kind` as its page arrives: its key, its JSON
    redacted, what was redacted (None: nothing), and what `seen` returned of it."""

    def kept(obj: Obj) -> Obj:
        counts = Redactions()
        redact(obj, counts)
        return {
            "key": _key(obj),
            "json": item_json(obj),
            "redacted": counts if counts != Redactions() else None,
            "noted": seen(kind, obj) if seen is not None else None,
        }

    return kept


def _list(
    client: RawClient,
    kind: str,
    *,
    namespaces: Sequence[str] | None,
    page_size: int,
    transform: Callable[[Obj], Obj],
) -> tuple[list[Obj], bool]:
    """The kind's objects in scope (each made `transform(obj)`, which holds its `key`), and
    whether its API is installed."""
    rt = KINDS[kind]
    everywhere = kind in ACROSS_NAMESPACES and kind != "Pod"
    if namespaces is None or not rt.namespaced or everywhere:
        items, version = list_objects(client, rt, page_size=page_size, transform=transform)
        return items, bool(items or version)
    found: dict[tuple[str, str], Obj] = {}
    version = ""
    for namespace in sorted(set(namespaces)):
        items, version = list_objects(
            client, rt, namespace=namespace, page_size=page_size, transform=transform
        )
        found.update({o["key"]: o for o in items})
    if kind == "Pod":  # every running pod: the nodes' free resources, the GPU components

        def unless_found(obj: Obj) -> Obj:  # a pod of those namespaces: kept from their list
            key = _key(obj)
            return {"key": key} if key in found else transform(obj)

        items, version = list_objects(
            client, rt, field_selector=ACTIVE_PODS, page_size=page_size, transform=unless_found
        )
        found.update({o["key"]: o for o in items if o["key"] not in found})
    return list(found.values()), bool(found or version)


def _key(obj: Obj) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def container_log(client: RawClient, log: Log, counts: Redactions) -> Log:
    """Fill `log` with the tail of that container's log (or the error that answered), its
    tokens redacted."""
    path = f"/api/v1/namespaces/{quote(log.namespace, safe='')}/pods/{quote(log.pod, safe='')}/log"
    query = [("container", log.container), ("tailLines", str(LOG_LINES)),
             ("limitBytes", str(LOG_BYTES))]  # fmt: skip
    if log.previous:
        query.append(("previous", "true"))
    read = Read("get", "pods/log", log.namespace)
    try:
        reply = send(client.api, server=client.server, method="GET", path=path, read=read,
                     deadline=client.deadline, query=query)  # fmt: skip
    except ReadFailedError as e:
        log.error = str(e)
        return log
    if reply.status != 200:
        log.error = str(mapped(reply, server=client.server, read=read))
        return log
    text = reply.body[:LOG_BYTES].decode("utf-8", errors="replace")
    log.text = scrub(text, counts).encode()
    return log
