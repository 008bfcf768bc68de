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

import contextlib
import errno
import io
import tempfile
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any
from urllib.parse import quote

import orjson

from kube import gzjoin
from kube.client import RawClient
from kube.lists import PAGE_SIZE, list_objects
from kube.live import ACTIVE_PODS
from kube.redact import Redactions, redact, scrub
from kube.transport import Read, mapped, send
from triage.cluster.coverage import ACROSS_NAMESPACES, KindRecord, Manifest
from triage.cluster.kinds import KINDS, NAMED
from triage.cluster.objects import Obj
from triage.cluster.snapshot import json_values
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
    """A snapshot collected: each kind's objects on disk (`Spool`), their manifest, and logs
    if asked. `close` deletes the spools."""

    objects: dict[str, Spool]
    manifest: Manifest
    logs: list[Log] = field(default_factory=list)
    redactions: Redactions = field(default_factory=Redactions)
    noted: list[tuple[str, object]] = field(default_factory=list)  # (kind, what `seen` kept)

    def close(self) -> None:
        for spool in self.objects.values():
            spool.close()


# A kind's List file, as `orjson.dumps({"apiVersion": "v1", "kind": "List", "metadata": {},
# "items": [...]}, option=OPT_INDENT_2)` writes it: LIST_HEAD, its items' `item_json`
# separated by LIST_SEPARATOR, LIST_TAIL.
LIST_HEAD = b'{\n  "apiVersion": "v1",\n  "kind": "List",\n  "metadata": {},\n  "items": [\n'
LIST_SEPARATOR = b",\n"
LIST_TAIL = b"\n  ]\n}"


def item_json(obj: Obj) -> bytes:
    """`obj` as one of the items of a List file: indented two spaces a level, at depth two
    (JSON strings hold no raw newline, so every newline is the layout's)."""
    return b"    " + orjson.dumps(obj, option=orjson.OPT_INDENT_2).replace(b"\n", b"\n    ")


_KEPT: Obj = {}  # what a list holds of an object kept in a spool


@dataclass
class Part:
    """One List file of a kind: where its items start in the spool (and end: -1, the spool's
    end), their size uncompressed, and how many."""

    start: int
    size: int = 0
    count: int = 0
    end: int = -1
    values: int = 0  # as a reader counts them (`triage.cluster.snapshot.json_values`)
    crc: int = 0  # CRC-32 of its items, uncompressed (`kube.gzjoin`)


PART_BYTES = 16 << 20  # a List file holds items up to this size: what a reader parses at once


class Spool:
    """One kind's objects as they arrive, on disk: redacted, as they stand between its List
    files' head and tail (`item_json`, separated), with what was redacted of them and what
    `seen` returned (None: nothing). A snapshot of 20,000 nodes is about 9 GB of JSON: held in
    memory it would not fit a laptop. A kind's objects make a List file per PART_BYTES (a
    reader parses a file whole), each a `Part` of the spool.

    Written plain (`gzip=False`), or compressed in pieces that a .tar.gz joins as they are
    (`kube.gzjoin`), so a snapshot is compressed once, as its pages arrive. Each list is its
    own stretch (`begin`, `end`); one that starts over after `410 Gone` drops what it wrote
    (`again`)."""

    def __init__(
        self,
        kind: str,
        *,
        directory: Path | None,
        gzip: bool,
        seen: Callable[[str, Obj], object] | None = None,
        part_bytes: int | None = None,
    ) -> None:
        self.kind = kind
        self.gzip = gzip
        # unlinked already: gone once closed, or when the command ends however it ends
        self.file: IO[bytes] = tempfile.TemporaryFile(dir=directory)  # noqa: SIM115
        self.parts: list[Part] = []
        self.count = 0
        self.redactions = Redactions()
        self.noted: list[object] = []
        self._seen = seen
        self._part_bytes = part_bytes or PART_BYTES
        self._zip: Any = None
        self._open = False  # the compressor holds a piece begun
        self._mark: tuple[Any, ...] = ()
        self.begin()

    def begin(self) -> None:
        """A list starts: what it keeps can be dropped (`again`) until `end`."""
        last = self.parts[-1] if self.parts else Part(0)
        self._mark = (self.file.tell(), self.count, replace(self.redactions), len(self.noted),
                      len(self.parts), last.size, last.count, last.values, last.crc)  # fmt: skip
        self._member()

    def again(self) -> None:
        """The list starts over: drop what it kept."""
        at, self.count, redactions, noted, parts, size, count, values, crc = self._mark
        self.redactions = replace(redactions)
        del self.noted[noted:]
        del self.parts[parts:]
        if self.parts:
            last = self.parts[-1]
            last.size, last.count, last.values, last.crc, last.end = size, count, values, crc, -1
        self.file.seek(at)
        self.file.truncate()
        self.begin()

    def end(self) -> None:
        if self._open:
            self.file.write(gzjoin.ended(self._zip))
            self._open = False

    def _member(self) -> None:
        """A new compressed piece from here on (nothing, writing plain)."""
        self._zip = gzjoin.compressor() if self.gzip else None
        self._open = False

    def keep(self, obj: Obj) -> Obj:
        """`obj`, redacted, written; what stands for it in the list (`_KEPT`)."""
        redact(obj, self.redactions)
        data = item_json(obj)
        part = self.parts[-1] if self.parts else None
        if part is None or part.size >= self._part_bytes:  # the next List file
            self.end()
            self._member()
            if part is not None:
                part.end = self.file.tell()
            part = Part(self.file.tell())
            self.parts.append(part)
        elif part.count:
            data = LIST_SEPARATOR + data
        part.count += 1
        part.size += len(data)
        part.values += json_values(data)
        part.crc = zlib.crc32(data, part.crc)
        self.count += 1
        if self._zip is not None:
            self._open = True
            data = self._zip.compress(data)
        self.file.write(data)
        if self._seen is not None and (noted := self._seen(self.kind, obj)) is not None:
            self.noted.append(noted)
        return _KEPT

    def copy_to(self, out: IO[bytes], part: Part) -> None:
        """What was written of `part` (compressed pieces, or its items plain) onto `out`."""
        self.file.flush()
        end = self.file.seek(0, io.SEEK_END) if part.end < 0 else part.end
        self.file.seek(part.start)
        left = end - part.start
        while left:
            chunk = self.file.read(min(left, 1 << 20))
            if not chunk:
                raise OSError(errno.EIO, f"the spool of {self.kind} ended early")
            out.write(chunk)
            left -= len(chunk)

    def close(self) -> None:
        """Delete what was written (whatever a full disk says of the last of it)."""
        with contextlib.suppress(OSError):
            self.file.close()


def collect(
    client: RawClient,
    *,
    namespaces: Sequence[str] | None,
    tool: str,
    page_size: int = PAGE_SIZE,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    seen: Callable[[str, Obj], object] | None = None,
    spool_in: Path | None = None,
    gzip: bool = False,
) -> Collected:
    """Every kind the engine reads (`namespaces`: these only, where the engine reads them per
    namespace; None: all), redacted. A kind that cannot be read is recorded as not collected
    with why; the first read (Nodes) failing for another reason than RBAC ends the command:
    the cluster cannot be read at all.

    Each object is redacted and written to its kind's `Spool` (in folder `spool_in`; None: the
    system's temporary folder) as soon as its page arrives, gzipped if `gzip`: memory holds a
    page, not the cluster. `seen(kind, obj)` is shown each, redacted; what it returns (None:
    nothing) is kept in `noted`. What was redacted, and what `seen` returned, count only for
    the objects of a kind collected (not for a list started again after `410 Gone`, nor for a
    kind whose next namespace or named object could not be read)."""
    got = Collected(objects={}, manifest=Manifest(cluster=client.cluster_name, taken_at="",
                                                  tool=tool, namespaces=None, kinds={}))  # fmt: skip
    records: dict[str, KindRecord] = {}
    order = ["Node", *(k for k in KINDS if k != "Node")]
    try:
        for i, kind in enumerate(order + list(NAMED)):
            spool = Spool(kind, directory=spool_in, gzip=gzip, seen=seen)
            try:
                if kind in NAMED:
                    installed = _get_named(client, kind, spool)
                else:
                    installed = _list(client, kind, spool, namespaces=namespaces,
                                      page_size=page_size)  # fmt: skip
            except ForbiddenError as e:
                spool.close()
                records[kind] = KindRecord(collected=False, reason=f"forbidden: {e}")
                continue
            except ReadFailedError as e:
                spool.close()
                if i == 0:
                    raise
                records[kind] = KindRecord(collected=False, reason=f"{e.fault}: {e}")
                continue
            except BaseException:
                spool.close()
                raise
            got.objects[kind] = spool
            got.redactions.add(spool.redactions)
            got.noted += [(kind, noted) for noted in spool.noted]
            records[kind] = KindRecord(collected=True, objects=spool.count, installed=installed)
    except BaseException:
        got.close()
        raise
    got.manifest = Manifest(
        cluster=client.cluster_name,
        taken_at=now().strftime("%Y-%m-%dT%H:%M:%SZ"),
        tool=tool,
        namespaces=tuple(sorted(set(namespaces))) if namespaces is not None else None,
        kinds=records,
    )
    return got


def _get_named(client: RawClient, kind: str, spool: Spool) -> bool:
    """The named objects of `kind` (`NAMED`) that exist, kept in `spool`."""
    rt, namespace, names = NAMED[kind]
    spool.begin()
    for name in names:
        obj = client.get_json(rt, verb="get", namespace=namespace, name=name)
        if obj is not None:
            obj.setdefault("kind", rt.kind)
            obj.setdefault("apiVersion", rt.api_version)
            spool.keep(obj)
    spool.end()
    return True


def _list(
    client: RawClient, kind: str, spool: Spool, *, namespaces: Sequence[str] | None,
    page_size: int,
) -> bool:  # fmt: skip
    """The kind's objects in scope, kept in `spool`; whether its API is installed."""
    rt = KINDS[kind]

    def listed(transform: Callable[[Obj], Obj], **query: Any) -> tuple[list[Obj], str]:
        spool.begin()
        got = list_objects(client, rt, page_size=page_size, transform=transform,
                           restarted=spool.again, **query)  # fmt: skip
        spool.end()
        return got

    everywhere = kind in ACROSS_NAMESPACES and kind != "Pod"
    if namespaces is None or not rt.namespaced or everywhere:
        items, version = listed(spool.keep)
        return bool(items or version)
    found: set[tuple[str, str]] = set()
    version = ""

    def keyed(obj: Obj) -> Obj:  # a namespace's pods: known, so the running ones are not twice
        spool.keep(obj)
        return {"key": _key(obj)}

    for namespace in sorted(set(namespaces)):
        items, version = listed(keyed if kind == "Pod" else spool.keep, namespace=namespace)
        found.update(o["key"] for o in items if kind == "Pod")
    if kind == "Pod":  # every running pod: the nodes' free resources, the GPU components

        def unless_found(obj: Obj) -> Obj:
            return _KEPT if _key(obj) in found else spool.keep(obj)

        items, version = listed(unless_found, field_selector=ACTIVE_PODS)
    return bool(spool.count or version)


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
