"""Cluster state from files: what `kubectl get … -o yaml|json` printed.

Accepts a `v1 List` (or any `*List`), a single object, multi-document YAML, JSON, or a folder
of such files. Kinds the engine does not read are ignored; anything that is not Kubernetes
objects is a `MalformedSnapshotError` naming the file and the problem.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from triage.cluster.objects import Obj
from triage.cluster.source import MalformedSnapshotError, MemorySource

SUFFIXES = (".yaml", ".yml", ".json")
# libyaml parses large `kubectl get -A -o yaml` dumps an order of magnitude faster.
_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _documents(path: Path) -> Iterator[Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise MalformedSnapshotError(f"{path}: cannot read: {e}") from e
    if path.suffix == ".json" or text.lstrip().startswith(("{", "[")):
        try:
            yield json.loads(text)
            return
        except json.JSONDecodeError as e:
            if path.suffix == ".json":
                raise MalformedSnapshotError(
                    f"{path}: invalid JSON at line {e.lineno}: {e.msg}"
                ) from e
    try:
        yield from yaml.load_all(text, Loader=_Loader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise MalformedSnapshotError(f"{path}: invalid YAML{where}: {problem}") from e


def _flatten(doc: Any, path: Path) -> Iterator[Obj]:
    if doc is None:
        return
    if isinstance(doc, list):
        for item in doc:
            yield from _flatten(item, path)
        return
    if not isinstance(doc, dict) or "kind" not in doc:
        raise MalformedSnapshotError(
            f"{path}: expected Kubernetes objects (mappings with 'kind'), got {type(doc).__name__}"
        )
    kind = doc["kind"]
    if isinstance(kind, str) and kind.endswith("List") and isinstance(doc.get("items"), list):
        for item in doc["items"]:
            if not isinstance(item, dict):
                raise MalformedSnapshotError(f"{path}: a {kind} item is not an object")
            # `kubectl get pods -o yaml` leaves kind off list items; infer it from the list kind.
            if "kind" not in item and kind != "List":
                item = {"kind": kind.removesuffix("List"), **item}
            yield item
        return
    yield doc


def load_objects(path: str | Path) -> list[Obj]:
    root = Path(path)
    if not root.exists():
        raise MalformedSnapshotError(f"{root}: no such file or directory")
    files = sorted(p for p in root.rglob("*") if p.suffix in SUFFIXES) if root.is_dir() else [root]
    if root.is_dir() and not files:
        raise MalformedSnapshotError(f"{root}: folder holds no .yaml, .yml or .json files")
    objects: list[Obj] = []
    for f in files:
        for doc in _documents(f):
            objects.extend(_flatten(doc, f))
    return objects


def load_snapshot(path: str | Path, *, cluster_name: str | None = None) -> MemorySource:
    """Read a snapshot into a ClusterSource."""
    return MemorySource(load_objects(path), cluster_name=cluster_name or Path(path).stem)
