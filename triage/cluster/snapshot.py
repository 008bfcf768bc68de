"""Cluster state from files: what `kubectl get … -o yaml|json` printed.

Accepts a `v1 List` (or any `*List`), a single object, multi-document YAML, JSON, a folder
of such files, or a `.tar.gz` of them (what `gpu-triage snapshot` writes). Kinds the engine
does not read are ignored; anything that is not Kubernetes objects is a
`MalformedSnapshotError` naming the file, the object and the problem. A `SnapshotManifest`
among the objects says what the snapshot collected (`triage.cluster.coverage`).

A snapshot is checked as the API server would check what it stores, within bounds any input
meets (`triage.cluster.bounded`): regular files only (a FIFO or a device would block or never
end), a total size limit, bounded nesting and YAML aliases, and the fields the engine reads of
the right types with valid quantities (`triage.cluster.schema`). An archive is read as a stream
and never unpacked to disk: its regular members only (a link or a device is refused, and so
is a name reaching outside it), and at most twice the size limit decompressed in all. Two different copies of one
object are refused (which one is the cluster's?); objects of an API version the engine does
not read are set aside, and their kind then reads as not in the snapshot, so the layers that
need it say "unknown" instead of judging without it. A snapshot with pods but no nodes holds
no Nodes as far as the engine is concerned: nodes were not collected.

A reader may keep less of each object than was read (`project`: the CLI keeps what the watch
cache keeps, a sixth of the memory); two copies then differ when what is kept of them does.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from triage.cluster.archive import ARCHIVES, read_archive, read_handle
from triage.cluster.bounded import TooComplexError, check_depth, first_line, loads_json, loads_yaml
from triage.cluster.collector import paused
from triage.cluster.coverage import (
    MANIFEST_API,
    MANIFEST_KIND,
    Manifest,
    ManifestError,
    from_manifest,
    without_manifest,
)
from triage.cluster.memory import MemorySource, newest_heartbeat
from triage.cluster.objects import Obj
from triage.cluster.schema import InvalidObjectError, check
from triage.cluster.source import ALL_KINDS, NAMED, MalformedSnapshotError

SUFFIXES = (".yaml", ".yml", ".json")
MAX_FILES = 10_000
# Bytes a snapshot may hold in all (GPU_TRIAGE_SNAPSHOT_MAX_MB sets another limit), and values
# per MB of that limit: what a parse costs is its values (about 330 bytes each, parsed and
# judged, for `kubectl get -o yaml` output; fewer for dense pathological input), which bytes
# bound poorly (indented JSON is three times the YAML of the same objects). The defaults keep
# any snapshot within about 1 GB and a few seconds: some 600 nodes and 18,000 pods. Larger
# clusters are best read live.
DEFAULT_MAX_MB = 64
VALUES_PER_MB = 48_000
# API versions the engine reads, per kind, beyond the one it lists live (`KINDS`): the shapes
# it knows how to read (DRA's beta shapes, both event APIs).
ALSO_READ: dict[str, tuple[str, ...]] = {
    "Event": ("events.k8s.io/v1",),
    "ResourceClaim": ("resource.k8s.io/v1beta1", "resource.k8s.io/v1beta2"),
    "ResourceClaimTemplate": ("resource.k8s.io/v1beta1", "resource.k8s.io/v1beta2"),
    "ResourceSlice": ("resource.k8s.io/v1beta1", "resource.k8s.io/v1beta2"),
    "DeviceClass": ("resource.k8s.io/v1beta1", "resource.k8s.io/v1beta2"),
}


def max_mb() -> int:
    raw = os.environ.get("GPU_TRIAGE_SNAPSHOT_MAX_MB", "")
    if raw.isascii() and raw.isdigit() and int(raw) > 0:
        return int(raw)
    return DEFAULT_MAX_MB


def values_in(path: Path, data: bytes) -> int:
    """About how many values parsing `data` makes, counted at C speed: one per separator,
    container and (in YAML, where a line holds one entry) line."""
    n = json_values(data)
    return n if path.suffix == ".json" else n + data.count(b"\n")


def json_values(data: bytes) -> int:
    """`values_in` of JSON (a writer counting what a reader will: `kube.collect.Spool`)."""
    return data.count(b",") + data.count(b"{") + data.count(b"[")


@dataclass
class Loaded:
    """What a snapshot holds: its objects, the kinds it cannot serve (with why), the
    namespaces it holds of some kinds, what every report must say it lacks, and the cluster
    its manifest names."""

    objects: list[Obj] = field(default_factory=list)
    not_served: dict[str, str] = field(default_factory=dict)
    scope: dict[str, frozenset[str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    cluster: str | None = None
    observed: datetime | None = None  # the newest node heartbeat


def _files(root: Path) -> list[Path]:
    if not root.is_dir():
        return [root]
    found: list[Path] = []
    for top, dirs, names in os.walk(root):  # symlinked folders are not followed
        dirs.sort()
        for name in sorted(names):
            if name.endswith(SUFFIXES):
                found.append(Path(top) / name)
                if len(found) > MAX_FILES:
                    raise MalformedSnapshotError(f"{root}: more than {MAX_FILES:,} files")
    if not found:
        raise MalformedSnapshotError(f"{root}: folder holds no .yaml, .yml or .json files")
    return found


def _read(path: Path, budget: int) -> bytes:
    """The file's bytes, if it is a regular file within `budget` bytes. Opened without
    blocking and checked on the open descriptor: a FIFO or a device is refused, not read."""
    with read_handle(path) as f:
        data = f.read(budget + 1)
    if len(data) > budget:
        raise MalformedSnapshotError(f"{path}: the snapshot is larger than {_limit()}")
    return data


def _inputs(root: Path, budget: int) -> Iterator[tuple[Path, bytes]]:
    """(name, bytes) of each snapshot file, within `budget` bytes in all: a folder's files,
    an archive's members, or the one file."""
    if root.is_file() and root.name.endswith(ARCHIVES):
        yield from read_archive(root, budget, limit=_limit())
        return
    for f in _files(root):
        data = _read(f, budget)
        budget -= len(data)
        yield f, data


def _limit() -> str:
    return (
        f"GPU_TRIAGE_SNAPSHOT_MAX_MB allows ({max_mb()} MiB, about "
        f"{max_mb() * VALUES_PER_MB:,} values: some 600 nodes and 18,000 pods by default); "
        "raise it, or read the cluster live"
    )


def _document(path: Path, data: bytes) -> Any:
    """The file parsed: JSON when it is .json or looks like JSON, else YAML (a YAML stream
    of several documents is their list)."""
    if path.suffix == ".json" or data.lstrip()[:1] in (b"{", b"["):
        try:
            return loads_json(data, depth=False)
        except TooComplexError as e:
            raise MalformedSnapshotError(f"{path}: {e}") from e
        except ValueError as e:
            if path.suffix == ".json":
                where = f" at line {e.lineno}" if isinstance(e, json.JSONDecodeError) else ""
                what = e.msg if isinstance(e, json.JSONDecodeError) else first_line(e)
                raise MalformedSnapshotError(f"{path}: invalid JSON{where}: {what}") from e
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise MalformedSnapshotError(f"{path}: not UTF-8 text (byte {e.start})") from e
    try:
        return loads_yaml(text, depth=False)
    except TooComplexError as e:
        raise MalformedSnapshotError(f"{path}: {e}") from e
    except (ValueError, UnicodeError) as e:  # yaml_rs.YAMLDecodeError is a ValueError
        said = first_line(e)
        at = _YAML_AT.search(said)
        where = f" at line {at.group(1)}, column {at.group(2)}" if at else ""
        what = _YAML_AT.sub("", said).removeprefix("YAML parse error").strip(" :,") or said
        raise MalformedSnapshotError(f"{path}: invalid YAML{where}: {what}") from e


_YAML_AT = re.compile(r"\s*at line (\d+), column (\d+)")


def _flatten(doc: Any, path: Path, *, top: bool = True) -> Iterator[Obj]:
    """The objects of a document: itself, a List's items, or (at the top, where a YAML stream
    of documents is a list) each of a list's."""
    if doc is None:
        return
    if isinstance(doc, list) and top:
        for item in doc:
            yield from _flatten(item, path, top=False)
        return
    if not isinstance(doc, dict) or "kind" not in doc:
        got = "a mapping without 'kind'" if isinstance(doc, dict) else type(doc).__name__
        raise MalformedSnapshotError(
            f"{path}: expected Kubernetes objects (mappings with 'kind'), got {got}"
        )
    kind = doc["kind"]
    if isinstance(kind, str) and kind.endswith("List") and "items" in doc:
        items = doc["items"]
        if items is None:
            return
        if not isinstance(items, list):
            got = type(items).__name__
            raise MalformedSnapshotError(f"{path}: a {kind}'s items must be a list, not {got}")
        for item in items:
            if not isinstance(item, dict):
                got = type(item).__name__
                raise MalformedSnapshotError(f"{path}: a {kind} item is not an object ({got})")
            # `kubectl get pods -o yaml` leaves kind off list items; infer it from the list kind.
            if "kind" not in item and kind != "List":
                item = {"kind": kind.removesuffix("List"), **item}
            yield item
        return
    yield doc


def _name(obj: Obj) -> str:
    """How an object is named in an error: "Pod team-a/x", "a Node without a name"."""
    kind = obj.get("kind")
    what = kind if isinstance(kind, str) else "an object"
    meta = obj.get("metadata")
    ns = meta.get("namespace") if isinstance(meta, dict) else None
    name = meta.get("name") if isinstance(meta, dict) else None
    if not isinstance(name, str) or not name:
        return f"{'a ' + what if isinstance(kind, str) else what} without a name"
    return f"{what} {ns + '/' if isinstance(ns, str) and ns else ''}{name}"


# What a reader keeps of an object it read: `project(kind)(obj)` (the live cache's projection).
Projections = Callable[[str], Callable[[Obj], Obj]]


def read_snapshot(path: str | Path, *, project: Projections | None = None) -> Loaded:
    """Every object the engine reads from the snapshot at `path`, checked, and what
    `project` keeps of it (None: the object whole). Two copies of an object differ when what
    is kept of them does."""
    root = Path(path)
    if not root.exists():
        raise MalformedSnapshotError(f"{root}: no such file or directory")
    values = max_mb() * VALUES_PER_MB
    out = Loaded()
    seen: dict[tuple[str, str, str], tuple[Obj, Path]] = {}
    versions: dict[str, set[str]] = {}
    manifest: Manifest | None = None
    others = 0  # objects of kinds the engine does not read
    observed: datetime | None = None
    # Millions of values parsed and kept, no cycles: the collector's walks of them cost a
    # quarter of the read (`triage.cluster.collector`); frozen, later ones skip them.
    with paused(freeze=True):
        for f, data in _inputs(root, max_mb() << 20):
            values -= values_in(f, data)
            if values < 0:
                raise MalformedSnapshotError(f"{f}: the snapshot holds more values than {_limit()}")
            for obj in _flatten(_document(f, data), f):
                if obj.get("kind") == MANIFEST_KIND and obj.get("apiVersion") == MANIFEST_API:
                    if manifest is not None:
                        raise MalformedSnapshotError(f"{f}: a second {MANIFEST_KIND}")
                    manifest = _manifest(obj, f)
                    continue
                kind = _checked(obj, f)
                if kind is None:
                    others += 1
                    continue
                api = obj.get("apiVersion") or ALL_KINDS[kind].api_version
                if api != ALL_KINDS[kind].api_version and api not in ALSO_READ.get(kind, ()):
                    versions.setdefault(kind, set()).add(str(api))
                    continue
                meta = obj["metadata"]
                key = (kind, str(meta.get("namespace") or ""), str(meta["name"]))
                if kind == "Node":
                    observed = max(filter(None, (observed, newest_heartbeat([obj]))), default=None)
                if project is not None:
                    obj = _projected(project, kind, obj)
                first = seen.get(key)
                if first is None:
                    seen[key] = (obj, f)
                    out.objects.append(obj)
                elif first[0] != obj:
                    raise MalformedSnapshotError(
                        f"{_name(obj)} appears twice with different contents ({first[1]} and "
                        f"{f}): take the snapshot once, or remove one copy"
                    )
                # else: the same object twice (overlapping files): one copy is enough
    if not out.objects:
        what = "no objects" if not others else "no objects of the kinds the engine reads"
        raise MalformedSnapshotError(f"{root}: the snapshot holds {what}")
    for kind, apis in sorted(versions.items()):
        out.not_served[kind] = (
            f"the snapshot's {kind} objects are {', '.join(sorted(apis))}, which this version "
            f"does not read (it reads {ALL_KINDS[kind].api_version})"
        )
    kinds = {o["kind"] for o in out.objects}
    if "Pod" in kinds and "Node" not in kinds:
        out.not_served.setdefault(
            "Node", "the snapshot holds no Nodes: take it with `gpu-triage snapshot`"
        )
    covered = from_manifest(manifest) if manifest else without_manifest(kinds | set(versions))
    for kind, why in covered.not_served.items():
        out.not_served.setdefault(kind, why)
    out.scope, out.notes = covered.scope, covered.notes
    out.cluster = manifest.cluster if manifest else None
    out.observed = observed
    return out


def _projected(project: Projections, kind: str, obj: Obj) -> Obj:
    """What `project` keeps of `obj`; the object whole when its shape is one the projection
    does not expect (a snapshot edited by hand: fields the engine does not read, of odd types),
    so that it is judged as it would be whole."""
    try:
        return project(kind)(obj)
    except (AttributeError, TypeError, ValueError, KeyError, IndexError):
        return obj


def _manifest(obj: Obj, f: Path) -> Manifest:
    try:
        return Manifest.from_object(obj)
    except ManifestError as e:
        raise MalformedSnapshotError(f"{f}: {MANIFEST_KIND}: {e}") from e


def _checked(obj: Obj, f: Path) -> str | None:
    """The object's kind when the engine reads it (None: a kind it ignores), once the object
    is one the API server would store. Drops managedFields, which nothing reads."""
    kind = obj.get("kind")
    if not isinstance(kind, str):
        raise MalformedSnapshotError(
            f"{f}: {_name(obj)}: kind: expected a string, got {type(kind).__name__}"
        )
    if kind not in ALL_KINDS:
        return None
    meta = obj.get("metadata")
    if kind in NAMED:  # read by name only (the autoscaler's status): none other is kept
        _, namespace, names = NAMED[kind]
        if not isinstance(meta, dict) or meta.get("namespace") != namespace:
            return None
        if not isinstance(meta.get("name"), str) or meta["name"] not in names:
            return None
    if isinstance(meta, dict):
        meta.pop("managedFields", None)  # less to hold and to walk
    try:
        check_depth(obj)
        check(obj)
    except (InvalidObjectError, TooComplexError) as e:
        raise MalformedSnapshotError(f"{f}: {_name(obj)}: {e}") from e
    return kind


def load_objects(path: str | Path) -> list[Obj]:
    """The objects of the snapshot at `path` (see `read_snapshot`)."""
    return read_snapshot(path).objects


def load_snapshot(
    path: str | Path, *, cluster_name: str | None = None, project: Projections | None = None
) -> MemorySource:
    """Read a snapshot into a ClusterSource (`project`: see `read_snapshot`)."""
    loaded = read_snapshot(path, project=project)
    name = cluster_name or loaded.cluster or _cluster_name(Path(path))
    return MemorySource(
        loaded.objects,
        cluster_name=name,
        not_served=loaded.not_served,
        scope=loaded.scope,
        notes=loaded.notes,
        observed=loaded.observed,
    )


def _cluster_name(path: Path) -> str:
    """The snapshot's name for its cluster, when no manifest names it: the file's stem, or
    the folder's name (never empty: `--snapshot .` names the current folder)."""
    for suffix in ARCHIVES:
        if path.name.endswith(suffix):
            return path.name.removesuffix(suffix) or "snapshot"
    return path.stem or path.resolve().name or "snapshot"
