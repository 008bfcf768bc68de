"""What a snapshot holds of the kinds the engine reads, and what a report must say it lacks.

A triage is only as good as what it reads: a snapshot taken without ResourceSlices judges a
DRA claim on nothing and blames the driver. So a snapshot says what it collected, in a
manifest (`gpu-triage snapshot` writes one, an object of kind `SnapshotManifest`), and the
engine believes it:

- a kind the manifest says was not collected (forbidden, an error, not asked for) is not
  served: every read of it fails, so the layers that needed it are `unknown`;
- a kind collected with no objects is served, and empty (no Kueue installed);
- a namespace-scoped snapshot holds some kinds only for its namespaces (`scoped_kinds`): a
  read of another namespace, or of all of them, is not served (events excepted: they are
  evidence, and a partial list is still evidence);
- every report carries one note per group of kinds not collected, naming what could not be
  judged ("no ResourceSlices in the snapshot: DRA claims not judged").

A snapshot without a manifest (`kubectl get … -o yaml`) cannot tell "not collected" from
"none exist": its missing kinds are read as empty, as before, and one note in every report
names them and what was judged as if none existed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from triage.cluster.kinds import ALL_KINDS, KINDS, NAMED

MANIFEST_API = "snapshot.gpu-triage.io/v1"
MANIFEST_KIND = "SnapshotManifest"
MANIFEST_FILE = "manifest.yaml"

# Namespaced kinds the engine reads in every namespace to judge any one pod (the pods on each
# node decide what is free on it; GPU components run in their own namespace; autoscalers,
# volumes attached to a node and DRA allocations belong to other tenants): a snapshot of some
# namespaces still collects these everywhere.
ACROSS_NAMESPACES = ("Pod", "DaemonSet", "Deployment", "PersistentVolumeClaim", "ResourceClaim")
# Kinds a triage cannot do without: a snapshot lacking them is refused or marks them itself.
CORE = ("Node", "Pod")
# What the engine judges with each group of kinds, in the words of a report's note.
JUDGES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("Namespace",), "namespace labels (team routes, namespace selectors)"),
    (("Event",), "events (evidence only: object state decides)"),
    (("ResourceQuota",), "ResourceQuota limits"),
    (("PriorityClass",), "priority classes"),
    (("RuntimeClass",), "runtime classes"),
    (("DaemonSet",), "which GPU components serve each node"),
    (("ClusterPolicy",), "the GPU Operator's switches"),
    (("Deployment", "ReplicaSet", "StatefulSet", "Job"), "workloads without pods"),
    (("PersistentVolumeClaim", "PersistentVolume", "StorageClass", "CSINode"), "volumes"),
    (("ResourceClaim", "ResourceClaimTemplate", "ResourceSlice", "DeviceClass"), "DRA claims"),
    (("Workload", "LocalQueue", "ClusterQueue"), "Kueue admission"),
    (("PodGroup", "Queue"), "Volcano queues"),
    (("NodePool", "NodeClaim"), "Karpenter provisioning"),
    (("ConfigMap",), "the cluster-autoscaler's status"),
)


def plural(kind: str) -> str:
    """`ResourceSlice` -> `ResourceSlices`, `ClusterPolicy` -> `ClusterPolicies`."""
    if kind.endswith("y"):
        return kind[:-1] + "ies"
    return kind + ("es" if kind.endswith("s") else "s")


def _names(kinds: Iterable[str]) -> str:
    return ", ".join(plural(k) for k in kinds)


class ManifestError(ValueError):
    """A SnapshotManifest that is not one: says which field is wrong."""


@dataclass(frozen=True)
class KindRecord:
    """What the manifest says of one kind."""

    collected: bool
    objects: int = 0
    reason: str = ""  # why it was not collected
    installed: bool = True  # False: the API is not served by the cluster (collected, empty)


@dataclass
class Manifest:
    """A snapshot's account of itself (`gpu-triage snapshot` writes it)."""

    cluster: str
    taken_at: str = ""
    tool: str = ""
    namespaces: tuple[str, ...] | None = None  # None: every namespace
    kinds: dict[str, KindRecord] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)  # redactions, logs: for people

    def to_object(self) -> dict[str, Any]:
        """The manifest as the object written into the snapshot."""
        kinds: dict[str, Any] = {}
        for kind, r in sorted(self.kinds.items()):
            entry: dict[str, Any] = {"apiVersion": ALL_KINDS[kind].api_version}
            entry["collected"] = r.collected
            if r.collected:
                entry["objects"] = r.objects
                if not r.installed:
                    entry["installed"] = False
            else:
                entry["reason"] = r.reason
            kinds[kind] = entry
        meta: dict[str, Any] = {"name": self.cluster}
        if self.taken_at:
            meta["creationTimestamp"] = self.taken_at
        return {
            "apiVersion": MANIFEST_API,
            "kind": MANIFEST_KIND,
            "metadata": meta,
            "tool": self.tool,
            "namespaces": list(self.namespaces) if self.namespaces is not None else None,
            "kinds": kinds,
            **self.extra,
        }

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> Manifest:
        meta = obj.get("metadata")
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
            raise ManifestError("metadata.name: expected the cluster's name")
        namespaces = obj.get("namespaces")
        if namespaces is not None and not (
            isinstance(namespaces, list) and all(isinstance(n, str) for n in namespaces)
        ):
            raise ManifestError("namespaces: expected a list of names, or null for all")
        raw = obj.get("kinds")
        if not isinstance(raw, dict):
            raise ManifestError("kinds: expected a mapping of kind to what was collected")
        kinds = {}
        for kind, entry in raw.items():
            if not isinstance(entry, dict) or not isinstance(entry.get("collected"), bool):
                raise ManifestError(f"kinds.{kind}.collected: expected true or false")
            objects = entry.get("objects", 0)
            if not isinstance(objects, int) or isinstance(objects, bool):
                raise ManifestError(f"kinds.{kind}.objects: expected a number")
            kinds[str(kind)] = KindRecord(
                collected=entry["collected"],
                objects=objects,
                reason=str(entry.get("reason") or ""),
                installed=entry.get("installed", True) is not False,
            )
        return cls(
            cluster=meta["name"],
            taken_at=str(meta.get("creationTimestamp") or ""),
            tool=str(obj.get("tool") or ""),
            namespaces=tuple(namespaces) if namespaces is not None else None,
            kinds=kinds,
        )


@dataclass
class Coverage:
    """What a source over a snapshot must not serve, and what every report must say."""

    not_served: dict[str, str] = field(default_factory=dict)  # kind -> why
    scope: dict[str, frozenset[str]] = field(default_factory=dict)  # kind -> namespaces held
    notes: list[str] = field(default_factory=list)


def scoped_kinds() -> list[str]:
    """Namespaced kinds a namespace-scoped snapshot holds for its namespaces only."""
    return [k for k, rt in KINDS.items() if rt.namespaced and k not in ACROSS_NAMESPACES]


def from_manifest(manifest: Manifest) -> Coverage:
    """The manifest believed: kinds not collected are not served, and say so in a note."""
    out = Coverage()
    missing: dict[str, str] = {}
    for kind in ALL_KINDS:
        record = manifest.kinds.get(kind)
        if record is None:
            tool = manifest.tool or "an older gpu-triage"
            missing[kind] = f"{tool} did not collect them"
        elif not record.collected:
            missing[kind] = record.reason or "not collected"
    for kind, why in missing.items():
        out.not_served[kind] = f"the snapshot holds no {plural(kind)}: {why}"
    for kinds, what in JUDGES:
        absent = [k for k in kinds if k in missing]
        if absent:
            whys = sorted({missing[k] for k in absent})
            out.notes.append(
                f"no {_names(absent)} in the snapshot ({'; '.join(whys)}): {what} not judged"
            )
    if manifest.namespaces is not None:
        held = frozenset(manifest.namespaces)
        # No note: a triage in these namespaces misses nothing, and one elsewhere meets
        # NotServedError, which names the namespaces held.
        out.scope = {k: held for k in scoped_kinds() if k not in missing}
    return out


def without_manifest(kinds_present: Iterable[str]) -> Coverage:
    """A snapshot that does not say what it collected: its absent kinds read as empty, and
    one note names them and what was judged as if none existed."""
    present = set(kinds_present)
    parts = []
    for kinds, what in JUDGES:
        absent = [k for k in kinds if k not in present]
        if absent:
            parts.append(f"{_names(absent)} ({what})")
    if not parts:
        return Coverage()
    return Coverage(
        notes=[
            "the snapshot does not say what it collected and holds no "
            + "; ".join(parts)
            + ": judged as if none exist (`gpu-triage snapshot` records what it collected)"
        ]
    )


__all__ = ["MANIFEST_API", "MANIFEST_FILE", "MANIFEST_KIND", "NAMED", "Coverage", "Manifest"]
