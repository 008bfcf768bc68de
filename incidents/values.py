"""What the store hands out: frozen values, never ORM objects, so callers cannot lazy-load or
mutate rows behind the repository's back."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from triage.model import Layer, TriageReport


class IncidentStatus(StrEnum):
    """Lifecycle: open → acknowledged → resolved (open → resolved is allowed too)."""

    OPEN = "open"
    ACKNOWLEDGED = "acknowledged"
    RESOLVED = "resolved"


class Resolution(StrEnum):
    """Why an incident was resolved."""

    AUTO = "auto"  # a later triage found the workload running
    SUPERSEDED = "superseded"  # a later triage found a different cause; a new incident opened
    MANUAL = "manual"  # someone resolved it


class _Value(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


@dataclass(frozen=True, slots=True)
class ThreadRef:
    """Where people follow an incident, in any chat: the chat's name (`slack`), the channel
    and the thread, each as that chat names it (Slack: a channel id and the `ts` of the
    thread's first message). The store keeps it; only the chat's adapter reads inside."""

    chat: str
    channel: str
    thread: str


class _Threaded(_Value):
    """A value with a chat thread once one was posted (`chat`/`channel`/`thread`)."""

    chat: str | None
    channel: str | None
    thread: str | None

    @property
    def thread_ref(self) -> ThreadRef | None:
        if self.chat is None or self.channel is None or self.thread is None:
            return None
        return ThreadRef(chat=self.chat, channel=self.channel, thread=self.thread)


class Incident(_Threaded):
    """One cause blocking one workload, from first sighting until resolved. `channel` is
    where it was first asked about until its thread is posted (`thread_ref`)."""

    id: int
    cluster: str
    namespace: str
    kind: str
    name: str
    pod: str | None
    failing_layer: Layer | None
    fingerprint: str
    status: IncidentStatus
    headline: str
    opened_at: datetime
    updated_at: datetime
    acknowledged_at: datetime | None
    acknowledged_by: str | None
    resolved_at: datetime | None
    resolved_by: str | None
    resolution: Resolution | None
    requested_by: str | None
    owner_team: str | None
    owner_channel: str | None
    owner_usergroup: str | None
    run_count: int
    snoozed_until: datetime | None = None
    snoozed_by: str | None = None
    reopened_at: datetime | None = None
    reopen_count: int = 0

    def snoozed(self, now: datetime) -> bool:
        """Whether it is snoozed at `now` (acknowledged until a time that has not come)."""
        return self.snoozed_until is not None and self.snoozed_until > now

    @property
    def workload(self) -> str:
        """`namespace/Kind name`, as shown to people."""
        return f"{self.namespace}/{self.kind} {self.name}"

    @property
    def is_open(self) -> bool:
        return self.status is not IncidentStatus.RESOLVED


class TriageRun(_Value):
    """One triage as it was answered. `report` is the stored JSON of the `TriageReport`."""

    id: int
    incident_id: int | None
    cluster: str
    namespace: str
    kind: str
    name: str
    failing_layer: Layer | None
    fingerprint: str
    headline: str
    report: dict[str, Any]
    duration_ms: float
    created_at: datetime
    requested_by: str | None
    channel: str | None
    source: str = "slack"  # where it was asked: "slack" (the bot) or "cli"

    def parsed_report(self) -> TriageReport | None:
        """The report as a model, or None when it was written by an incompatible version."""
        try:
            return TriageReport.model_validate(self.report)
        except ValidationError:
            return None


class RecordResult(_Value):
    """What `IncidentStore.record` did.

    `incident` is the incident the run was attached to (new, continued or just resolved); None
    when the workload was running and nothing was open. `auto_resolved` lists incidents this
    record closed: resolved because the workload runs, or superseded by a new cause.
    """

    incident: Incident | None
    created: bool
    auto_resolved: list[int]
    run_id: int


class Stats(_Value):
    """Counts per layer, what is open now, and how long resolution takes (in seconds)."""

    total: int
    open_now: int
    resolved: int
    by_layer: dict[Layer, int]
    open_by_layer: dict[Layer, int]
    median_time_to_resolve_seconds: float | None
    median_time_to_resolve_seconds_by_layer: dict[Layer, float | None]
    median_time_to_acknowledge_seconds: float | None = None
    median_time_to_acknowledge_seconds_by_layer: dict[Layer, float | None] = {}


class GroupIncident(_Threaded):
    """A root cause shared by stuck workloads, followed from first sighting until no workload
    is stuck on it any more; `thread_ref` locates its alert once posted (`channel` alone is
    where a claim to post it went)."""

    id: int
    cluster: str
    key: str
    status: str  # open | resolved
    layer: Layer
    code: str
    cause: str
    owner_team: str | None
    owner_channel: str | None
    workloads: int
    gpus: int
    members: list[dict[str, Any]]
    version: int
    opened_at: datetime
    updated_at: datetime
    resolved_at: datetime | None
    posted_at: datetime | None
    announced_workloads: int

    @property
    def is_open(self) -> bool:
        return self.status == "open"


class GroupChange(_Value):
    """What one sync did to a group, for the caller that made the change (and only it):
    `opened`, `changed` (members came or went) or `resolved` (none left)."""

    kind: str
    group: GroupIncident
    previous_workloads: int = 0


@dataclass(frozen=True, slots=True)
class NewJob:
    """What a delivery needs to be answered by any replica: kind ("command", "mention"), the
    payload the bot replays, the replica taking it and for how long."""

    kind: str
    payload: dict[str, Any]
    owner: str
    lease: timedelta


@dataclass(frozen=True, slots=True)
class Job:
    """A claimed job: its key, kind, payload, the cluster it must run in (None: any) and how
    many replicas took it, this one included."""

    key: str
    kind: str
    payload: dict[str, Any]
    cluster: str | None
    attempts: int
    received_at: datetime


# A claim to post a group's alert that has no thread after this long was left by a replica
# that died between the claim and the post (Slack calls time out well before).
CLAIM_TTL = timedelta(minutes=2)
