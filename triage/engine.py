"""Entry point of the triage engine (filled in by the engine work)."""

from __future__ import annotations

from datetime import datetime

from triage.config import EngineConfig
from triage.model import TriageReport
from triage.playbooks import Playbook
from triage.source import ClusterSource


def triage(
    source: ClusterSource,
    *,
    namespace: str,
    name: str,
    config: EngineConfig | None = None,
    playbook: Playbook | None = None,
    now: datetime | None = None,
) -> TriageReport:
    """Explain why the pod (or workload) `namespace/name` is not running.

    Raises `InvalidNameError` for names Kubernetes would reject, `NotFoundError` when neither a
    pod nor a workload of that name exists (or the namespace does not), and other
    `SourceError`s when the cluster cannot be read at all.
    """
    raise NotImplementedError
