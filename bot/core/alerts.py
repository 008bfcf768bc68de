"""Alerts about the fleet view's groups: one Slack thread per root cause, in the owner's channel.

Opt-in per channel (the alerts YAML lists the channels that want them). Each sweep the groups
are synced with the incident store, and only the caller the store reports a change to acts on
it: a new group is posted once (when it passes the channel's thresholds, outside its quiet
hours, within its hourly limit); members coming or going update that message in place
(`chat.update`); growth past the channel's step is said once in the thread; an emptied group is
marked resolved. A finding that did not change says nothing, after a restart too, and with
several replicas on one database each change is acted on once.
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
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.slack.blocks import section
from bot.slack.fleet import alert_text, group_blocks
from bot.slack.mrkdwn import escape
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
        client: WebClient,
        groups: GroupBookLike,
        config: AlertConfig,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.client, self.groups, self.config, self.clock = client, groups, config, clock

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
            posted = self.client.chat_postMessage(
                channel=rule.id or channel,
                text=alert_text(group.layer.value, group.cluster, group.cause),
                blocks=group_blocks(group, now=now),
                unfurl_links=False,
            )
        except SlackApiError as e:
            log.warning("alert for group %s not posted to %s: %s", row.id, channel, e)
            self.groups.release_post(row.id)
            return
        where = str(posted.get("channel") or rule.id or channel)
        self.groups.attach_thread(row.id, thread=ThreadRef("slack", where, str(posted.get("ts"))))
        self.groups.claim_announce(row.id, seen=row.announced_workloads, workloads=group.workloads)
        out.posted += 1

    def _changed(self, change: GroupChange, group: Group, now: datetime, out: CycleResult) -> None:
        row = change.group
        if row.channel is None or row.thread is None:
            return  # not posted (yet): nothing to update
        try:
            self.client.chat_update(
                channel=row.channel,
                ts=row.thread,
                text=alert_text(group.layer.value, group.cluster, group.cause),
                blocks=group_blocks(group, now=now),
            )
            out.updated += 1
            rule = self.config.rule(row.owner_channel) or ChannelRule()
            seen = row.announced_workloads
            if group.workloads < seen:  # growth counts from the low-water mark
                self.groups.claim_announce(row.id, seen=seen, workloads=group.workloads)
            elif group.workloads >= seen + rule.grow_by and self.groups.claim_announce(
                row.id, seen=seen, workloads=group.workloads
            ):
                self.client.chat_postMessage(
                    channel=row.channel,
                    thread_ts=row.thread,
                    reply_broadcast=True,
                    text=(
                        f"grew from {seen} to {group.workloads} stuck workload(s), "
                        f"{group.gpus} GPU(s) waiting"
                    ),
                )
        except SlackApiError as e:
            log.warning("alert for group %s not updated: %s", row.id, e)

    def _resolved(self, row: GroupIncident, out: CycleResult) -> None:
        if row.channel is None or row.thread is None:
            return
        text = "resolved: " + alert_text(row.layer.value, row.cluster, row.cause)
        try:
            self.client.chat_update(
                channel=row.channel,
                ts=row.thread,
                text=text,
                blocks=[
                    section(f":white_check_mark: {escape(text)}\nno workload is stuck on it now")
                ],
            )
            self.client.chat_postMessage(
                channel=row.channel,
                thread_ts=row.thread,
                text="resolved: no workload is stuck on it now",
            )
            out.resolved += 1
        except SlackApiError as e:
            log.warning("alert for group %s not marked resolved: %s", row.id, e)


def _abandoned(row: GroupIncident, now: datetime) -> bool:
    """A claim to post that never got its thread: the replica that claimed it died between
    the claim and the post. `GroupBook.claim_post` lets another replica take it over."""
    return row.thread is None and row.posted_at is not None and row.posted_at < now - CLAIM_TTL
