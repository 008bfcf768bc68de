"""What the bot needs from the triage service, the incident store and the settings, as typed
Protocols.

The bot depends on these shapes, not on the concrete classes, so its tests and the real
`gpu_triage.service.TriageService` / `incidents.IncidentStore` are interchangeable here.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

from incidents.errors import StoreUnavailableError
from incidents.values import (
    GroupIncident,
    Incident,
    IncidentStatus,
    Job,
    NewJob,
    Stats,
    ThreadRef,
    TriageRun,
)
from triage import Layer, SourceStatus, TriageReport
from triage.fleet import Sweep
from triage.verify.node import NodeVerification


class CoreSettings(Protocol):
    """What the core reads from the settings: its worker pool and its replicas. The
    composition root's `gpu_triage.settings.Settings` provides it; the bot never imports
    that module."""

    workers: int
    max_pending: int
    http_threads: int
    replica_id: str | None
    job_lease: float
    job_poll: float
    delivery_deadline: float


class OutcomeLike(Protocol):
    @property
    def report(self) -> TriageReport: ...

    @property
    def incident(self) -> Incident | None: ...

    @property
    def created(self) -> bool: ...

    @property
    def store_error(self) -> str | None: ...

    @property
    def store_fault(self) -> str | None: ...

    @property
    def duration_ms(self) -> float: ...


class TriageServiceLike(Protocol):
    def run(
        self,
        *,
        cluster: str | None,
        namespace: str,
        name: str,
        requested_by: str | None,
        channel: str | None,
        via: str,
    ) -> OutcomeLike: ...

    def verify(self, *, cluster: str | None, node: str) -> NodeVerification: ...

    def sweep(self, *, cluster: str | None, namespaces: list[str] | None = None) -> Sweep: ...

    def cluster_name(self, cluster: str | None) -> str:
        """The served cluster `cluster` names (None: the default). Raises LookupError for a
        name the bot does not serve."""
        ...

    def clusters(self) -> Sequence[SourceStatus]: ...


class GroupsLike(Protocol):
    """What the handlers use of the store's incident groups."""

    def find(self, cluster: str, key: str) -> GroupIncident | None: ...

    def claim_post(self, group_id: int, *, channel: str) -> GroupIncident | None: ...

    def release_post(self, group_id: int) -> None: ...

    def attach_thread(self, group_id: int, *, thread: ThreadRef) -> None: ...

    def counts(self, *, cluster: str | None = None) -> dict[str, int]: ...


class DeliveriesLike(Protocol):
    """Deliveries seen and commands as jobs (`incidents.deliveries.DeliveryLog`)."""

    def first_time(self, key: str, job: NewJob | None = None) -> bool: ...

    def hand_off(self, key: str, *, owner: str, cluster: str) -> bool: ...

    def renew(self, keys: Collection[str], *, owner: str, lease: timedelta) -> set[str]: ...

    def finish(self, keys: Iterable[str]) -> None: ...

    def claim_reply(self, key: str, *, owner: str) -> bool: ...

    def claim(
        self,
        *,
        owner: str,
        clusters: Collection[str],
        lease: timedelta,
        max_age: timedelta,
        limit: int = 8,
    ) -> tuple[list[Job], list[str]]: ...


class ReplicaLike(Protocol):
    @property
    def id(self) -> str: ...

    @property
    def clusters(self) -> list[dict[str, Any]]: ...


class ReplicasLike(Protocol):
    def beat(
        self, replica: str, *, started_at: datetime, clusters: list[dict[str, Any]]
    ) -> None: ...

    def live(self, *, within: timedelta) -> Sequence[ReplicaLike]: ...

    def leave(self, replica: str) -> None: ...


class RelayStoreLike(Protocol):
    """What `bot.core.relay` uses of the incident store."""

    @property
    def read_only(self) -> StoreUnavailableError | None: ...

    @property
    def deliveries(self) -> DeliveriesLike: ...

    @property
    def replicas(self) -> ReplicasLike: ...


class IncidentStoreLike(Protocol):
    @property
    def read_only(self) -> StoreUnavailableError | None: ...

    def condition(self) -> str | None: ...

    def attach_thread(self, incident_id: int, *, thread: ThreadRef) -> None: ...

    def open_incident_for(self, *, cluster: str, namespace: str, name: str) -> Incident | None: ...

    def set_status(
        self, incident_id: int, status: IncidentStatus, *, by: str | None
    ) -> Incident: ...

    def snooze(
        self, incident_id: int, *, until: datetime | timedelta, by: str | None
    ) -> Incident: ...

    def get(self, incident_id: int) -> Incident | None: ...

    def list(
        self,
        *,
        status: IncidentStatus | None = None,
        layer: Layer | None = None,
        limit: int = 50,
        cluster: str | None = None,
    ) -> list[Incident]: ...

    def stats(
        self, *, cluster: str | None = None, where: Callable[[str, str], bool] | None = None
    ) -> Stats: ...

    def runs(self, incident_id: int) -> Sequence[TriageRun]: ...

    @property
    def groups(self) -> GroupsLike: ...

    @property
    def deliveries(self) -> DeliveriesLike: ...

    @property
    def replicas(self) -> ReplicasLike: ...
