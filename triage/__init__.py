"""GPU Triage engine: why a GPU pod is not running, layer by layer.

Pure: it reads cluster state only through `ClusterSource` and imports neither Slack, the
kubernetes client nor a database.
"""

from triage.cluster.memory import MemorySource
from triage.cluster.snapshot import load_snapshot
from triage.cluster.source import (
    ClusterSource,
    ForbiddenError,
    MalformedSnapshotError,
    NotFoundError,
    SourceError,
    SourceStatus,
    UnavailableError,
)
from triage.config import EngineConfig
from triage.engine import Prepared, prepare, triage
from triage.model import Audience, Finding, Layer, OwnerRoute, PodRef, Status, TriageReport
from triage.names import InvalidNameError, validate_cluster, validate_name, validate_namespace
from triage.playbooks import Playbook, PlaybookError, load_playbook

__all__ = [
    "Audience",
    "ClusterSource",
    "EngineConfig",
    "Finding",
    "ForbiddenError",
    "InvalidNameError",
    "Layer",
    "MalformedSnapshotError",
    "MemorySource",
    "NotFoundError",
    "OwnerRoute",
    "Playbook",
    "PlaybookError",
    "PodRef",
    "Prepared",
    "SourceError",
    "SourceStatus",
    "Status",
    "TriageReport",
    "UnavailableError",
    "load_playbook",
    "load_snapshot",
    "prepare",
    "triage",
    "validate_cluster",
    "validate_name",
    "validate_namespace",
]
