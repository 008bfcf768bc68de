"""Alerts about the fleet view's groups: one chat thread per root cause, in the owner's channel.

Opt-in per channel (the alerts YAML lists the channels that want them). Each sweep the groups
are synced with the incident store, and only the caller the store reports a change to acts on
it: a new group is posted once (when it passes the channel's thresholds, outside its quiet
hours, within its hourly limit); members coming or going update that message in place;
growth past the channel's step is said once in the thread; an emptied group is marked
resolved. A finding that did not change says nothing, after a restart too, and with several
replicas on one database each change is acted on once.

What decides is here; what posts is an `AlertSink`, the chat's (Slack's: `bot.slack.alerts`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, time, timedelta
from pathlib import Path
from typing import Protocol
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from bot.core.chat import ChatError
from incidents.values import CLAIM_TTL, GroupChange, GroupIncident, ThreadRef
from triage.fleet import Group, Sweep

log = logging.getLogger(__name__)


class AlertConfigError(ValueError):
    """The alerts file cannot be used. `str(e)` says what to fix, in one line."""


class ChannelRule(BaseModel):
    """What one channel wants to hear about."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str | None = Field(default=None, description="channel id to post to (default: the key)")
    min_workloads: int = Field(default=1, ge=1)
    min_gpus: int = Field(default=1, ge=0)
    grow_by: int = Field(default=5, ge=1, description="say so in the thread when it grows by this")
    max_posts_per_hour: int = Field(default=6, ge=0)
    quiet_hours: str | None = Field(default=None, description='"22:00-07:00": no new posts then')
    timezone: str = "UTC"

    @field_validator("quiet_hours")
    @classmethod
    def _hours(cls, value: str | None) -> str | None:
        if value is not None:
            _window(value)
        return value

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown timezone {value!r}") from None
        return value

    def quiet(self, now: datetime) -> bool:
        if self.quiet_hours is None:
            return False
        start, end = _window(self.quiet_hours)
        local = now.astimezone(ZoneInfo(self.timezone)).time()
        return start <= local < end if start <= end else local >= start or local < end


def _window(text: str) -> tuple[time, time]:
    try:
        start, end = (time.fromisoformat(part.strip()) for part in text.split("-", 1))
    except ValueError:
        raise ValueError(f"quiet_hours must look like 22:00-07:00, not {text!r}") from None
    return start, end


class AlertConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    interval_seconds: float = Field(default=60.0, ge=5.0)
    channels: dict[str, ChannelRule] = Field(default_factory=dict)

    def rule(self, channel: str | None) -> ChannelRule | None:
        return None if channel is None else self.channels.get(channel)


def load_alerts(path: str | Path) -> AlertConfig:
    try:
        raw = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        return AlertConfig.model_validate(raw)
    except OSError as e:
        raise AlertConfigError(f"alerts file {path}: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise AlertConfigError(
            f"alerts file {path} is not YAML: {str(e).splitlines()[0]}"
        ) from None
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise AlertConfigError(f"alerts file {path}: {where}: {err['msg']}") from None


class AlertSink(Protocol):
    """Where alerts go: a chat, in its words. Each method raises `ChatError` when refused."""

    def open(self, group: Group, *, channel: str, now: datetime) -> ThreadRef:
        """Post the first message about `group` in `channel`: the thread that follows it."""
        ...

    def update(self, thread: ThreadRef, group: Group, *, now: datetime) -> None:
        """Rewrite the thread's first message: members came or went."""
        ...

    def grew(self, thread: ThreadRef, group: Group, *, before: int) -> None:
        """Say once, in the thread and to the channel, that the group grew past its step."""
        ...

    def resolved(self, thread: ThreadRef, row: GroupIncident) -> None:
        """Mark the thread resolved: no workload is stuck on it any more."""
        ...


class GroupBookLike(Protocol):
    def sync(self, cluster: str, groups: Iterable[Group]) -> list[GroupChange]: ...
    def open_by_key(self, cluster: str) -> dict[str, GroupIncident]: ...
    def claim_post(self, group_id: int, *, channel: str) -> GroupIncident | None: ...
    def release_post(self, group_id: int) -> None: ...
    def attach_thread(self, group_id: int, *, thread: ThreadRef) -> None: ...
    def claim_announce(self, group_id: int, *, seen: int, workloads: int) -> bool: ...
    def posts_since(self, channel: str, since: datetime) -> int: ...


@dataclass
class CycleResult:
    posted: int = 0
    updated: int = 0
    resolved: int = 0
    held: list[str] = field(default_factory=list)  # why a new group was not posted


class Alerter:
    def __init__(
        self,
        *,
        sink: AlertSink,
        groups: GroupBookLike,
        config: AlertConfig,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.sink, self.groups, self.config, self.clock = sink, groups, config, clock

    def cycle(self, sweep: Sweep) -> CycleResult:
        """Sync the sweep's groups and act on what changed (see the module docstring)."""
        out = CycleResult()
        if sweep.partial:
            # Workloads that could not be found, triaged or judged would read as groups gone:
            # resolve nothing on a partial picture; the next sweep tries again.
            missing = len(sweep.errors) + len(sweep.unknown)
            out.held.append(
                f"sweep incomplete ({missing} not triaged or judged, "
                f"{len(sweep.unread)} read(s) failed): no changes"
            )
            return out
        now = self.clock()
        current = {g.key: g for g in sweep.groups}
        for change in self.groups.sync(sweep.cluster, sweep.groups):
            if change.kind == "changed" and change.group.key in current:
                self._changed(change, current[change.group.key], now, out)
            elif change.kind == "resolved":
                self._resolved(change.group, out)
        stored = self.groups.open_by_key(sweep.cluster)
        for group in sweep.groups:
            self._maybe_post(stored.get(group.key), group, now, out)
        return out

    def _maybe_post(
        self, row: GroupIncident | None, group: Group, now: datetime, out: CycleResult
    ) -> None:
        channel = group.owner.channel if group.owner else None
        rule = self.config.rule(channel)
        if rule is None or channel is None:
            return  # that channel has not asked for alerts
        if row is None or (row.posted_at is not None and not _abandoned(row, now)):
            return
        if group.workloads < rule.min_workloads or group.gpus < rule.min_gpus:
            return
        if rule.quiet(now):
            out.held.append(f"{channel}: quiet hours")
            return
        if self.groups.posts_since(channel, now - timedelta(hours=1)) >= rule.max_posts_per_hour:
            out.held.append(f"{channel}: {rule.max_posts_per_hour} posts in the last hour")
            return
        claimed = self.groups.claim_post(row.id, channel=channel)
        if claimed is None:
            return  # another replica posts it
        try:
            thread = self.sink.open(group, channel=rule.id or channel, now=now)
        except ChatError as e:
            log.warning("alert for group %s not posted to %s: %s", row.id, channel, e)
            self.groups.release_post(row.id)
            return
        self.groups.attach_thread(row.id, thread=thread)
        self.groups.claim_announce(row.id, seen=row.announced_workloads, workloads=group.workloads)
        out.posted += 1

    def _changed(self, change: GroupChange, group: Group, now: datetime, out: CycleResult) -> None:
        row, thread = change.group, change.group.thread_ref
        if thread is None:
            return  # not posted (yet): nothing to update
        try:
            self.sink.update(thread, group, now=now)
            out.updated += 1
            rule = self.config.rule(row.owner_channel) or ChannelRule()
            seen = row.announced_workloads
            if group.workloads < seen:  # growth counts from the low-water mark
                self.groups.claim_announce(row.id, seen=seen, workloads=group.workloads)
            elif group.workloads >= seen + rule.grow_by and self.groups.claim_announce(
                row.id, seen=seen, workloads=group.workloads
            ):
                self.sink.grew(thread, group, before=seen)
        except ChatError as e:
            log.warning("alert for group %s not updated: %s", row.id, e)

    def _resolved(self, row: GroupIncident, out: CycleResult) -> None:
        thread = row.thread_ref
        if thread is None:
            return
        try:
            self.sink.resolved(thread, row)
            out.resolved += 1
        except ChatError as e:
            log.warning("alert for group %s not marked resolved: %s", row.id, e)


def _abandoned(row: GroupIncident, now: datetime) -> bool:
    """A claim to post that never got its thread: the replica that claimed it died between
    the claim and the post. `GroupBook.claim_post` lets another replica take it over."""
    return row.thread is None and row.posted_at is not None and row.posted_at < now - CLAIM_TTL
