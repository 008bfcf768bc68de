"""Events in one shape: core/v1 and events.k8s.io/v1 normalised, newest first.

Events expire (an hour by default), so the engine treats them as evidence beside object
state, never as the only reason for a verdict.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, NamedTuple

from triage.cluster.objects import Obj, meta


class Event(NamedTuple):
    """An event normalised across the core/v1 and events.k8s.io/v1 shapes. (A tuple: a sweep
    makes one per event of every stuck pod.)"""

    reason: str
    message: str
    type: str
    times: int  # how many times it was seen
    last_seen: datetime | None
    kind: str
    name: str

    def __str__(self) -> str:
        times = f" (x{self.times})" if self.times > 1 else ""
        return f"{self.kind}/{self.name} event {self.reason}{times}: {self.message}"


def parse_time(value: Any) -> datetime | None:
    if not value or not isinstance(value, str):
        return None
    try:
        dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


def normalise_event(ev: Obj) -> Event:
    series = ev.get("series") or {}
    count = int(series.get("count") or ev.get("count") or ev.get("deprecatedCount") or 1)
    last = (
        parse_time(series.get("lastObservedTime"))
        or parse_time(ev.get("lastTimestamp"))
        or parse_time(ev.get("eventTime"))
        or parse_time(ev.get("firstTimestamp"))
        or parse_time(meta(ev).get("creationTimestamp"))
    )
    ref = ev.get("involvedObject") or ev.get("regarding") or {}
    return Event(
        reason=str(ev.get("reason") or ""),
        message=" ".join(str(ev.get("message") or ev.get("note") or "").split()),
        type=str(ev.get("type") or "Normal"),
        times=count,
        last_seen=last,
        kind=str(ref.get("kind") or ""),
        name=str(ref.get("name") or ""),
    )


_EPOCH = datetime.min.replace(tzinfo=UTC)


def _seen(e: Event) -> datetime:
    return e.last_seen or _EPOCH


def sorted_events(raw: Iterable[Obj]) -> list[Event]:
    """Newest first."""
    evs = [normalise_event(e) for e in raw]
    if len(evs) > 1:
        evs.sort(key=_seen, reverse=True)
    return evs


EventKey = tuple[str, str, str]  # (namespace, kind, name) of the object an event is about


def by_subject(events: Iterable[Obj]) -> dict[EventKey, list[Obj]]:
    """Events indexed by the object they are about (involvedObject, or `regarding` for
    events.k8s.io/v1), the namespace falling back to the event's own."""
    index: dict[EventKey, list[Obj]] = {}
    for ev in events:
        ref = ev.get("involvedObject") or ev.get("regarding") or {}
        ns = ref.get("namespace") or meta(ev).get("namespace", "")
        index.setdefault((ns, ref.get("kind", ""), ref.get("name", "")), []).append(ev)
    return index
