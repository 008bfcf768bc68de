"""Each Slack delivery is acted on once, and the ack never waits on the database for it.

Slack re-sends an event when it thinks it went unanswered (`X-Slack-Retry-Num`); bolt does not
drop those for us in HTTP mode. A bolt middleware records every delivery's key (the event id,
or the trigger id of a command or button) in the incident database, where the first replica to
insert it wins, and answers repeats with an empty 200 before any listener sees them: a retry
reaching a restarted bot or another replica is answered once too. Keys also stay in memory
for ten minutes, so repeats cost no query and a database outage does not turn every retry
into a second answer.

The record is best-effort: it gets `bot.core.deadline`'s short deadline, and a delivery whose
record failed or was late is acted on anyway (a command is then answered by this replica,
and its record retried by the relay). The log says so for each one.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from slack_bolt import BoltRequest, BoltResponse

from bot.core.deadline import DatabaseCalls
from bot.core.ports import DeliveriesLike
from bot.core.relay import Relay
from bot.core.work import SeenSet
from incidents.errors import IncidentStoreError
from incidents.values import NewJob

log = logging.getLogger(__name__)


class Deduper:
    def __init__(
        self, *, deliveries: DeliveriesLike, relay: Relay, calls: DatabaseCalls, ttl: float = 600.0
    ) -> None:
        self._deliveries, self._relay, self._calls = deliveries, relay, calls
        self._seen = SeenSet(ttl=ttl)

    def middleware(
        self, req: BoltRequest, resp: BoltResponse, next: Callable[[], BoltResponse]
    ) -> BoltResponse:
        """Drop a repeated delivery; lease a new command to this replica (`context["job"]`)."""
        key = dedupe_key(req.body)
        if key is None:
            return next()
        job = job_of(req.body)
        new = None if job is None else self._relay.new_job(*job)
        first = self._seen.first_time(key) and self._record(key, new)
        if first is False:
            retry = (req.headers.get("x-slack-retry-num") or ["-"])[0]
            log.info("dropping repeated delivery %s (retry %s)", key, retry)
            return BoltResponse(status=200, body="")
        if new is not None:
            # Ours to answer: leased to this replica from now on (or, unrecorded, answered
            # here whatever happens, and recorded again by the relay).
            self._relay.hold(key, unrecorded=new if first is None else None)
            req.context["job"] = key
        return next()

    def _record(self, key: str, job: NewJob | None) -> bool | None:
        """True: the first delivery of `key`; False: a repeat; None: the database could not
        say within the deadline."""
        if self._relay.read_only:
            log.warning("delivery %s not recorded: the incident database is read-only", key)
            return None

        def late(future: Future[bool]) -> None:
            if not future.cancelled() and future.exception() is None:
                self._relay.recorded(key)
                log.info("delivery %s recorded late (first: %s)", key, future.result())

        try:
            return self._calls.within(lambda: self._deliveries.first_time(key, job), late=late)
        except IncidentStoreError as e:
            log.warning("delivery %s not recorded (%s): this replica acts on it", key, e)
            return None


def job_of(body: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """What a command or a mention needs to be answered by another replica: (kind, payload).
    Buttons are not jobs: a press is answered where it lands, or pressed again."""
    if body.get("command") == "/gpu":
        keys = ("text", "user_id", "channel_id", "response_url")
        return "command", {k: body.get(k) for k in keys}
    event = body.get("event") or {}
    if body.get("type") == "event_callback" and event.get("type") == "app_mention":
        thread = event.get("thread_ts") or event.get("ts")
        fields = ("text", "user", "channel")
        return "mention", {**{f: event.get(f) for f in fields}, "thread_ts": thread}
    return None


def dedupe_key(body: dict[str, Any]) -> str | None:
    """One key per user action: the event id for events, the trigger id for commands/buttons."""
    if body.get("event_id"):
        return f"event:{body['event_id']}"
    if body.get("trigger_id"):
        return f"trigger:{body['trigger_id']}"
    return None
