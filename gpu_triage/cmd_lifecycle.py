"""`gpu-triage ack ID`, `snooze ID --until WHEN` and `resolve ID`: an incident's lifecycle from a
terminal, recorded with who (the login, `--as` to say otherwise) and when, as the Slack
buttons record it.

`--until` takes a duration from now (`30m`, `2h`, `1d`, `1h30m`) or a time (`2027-02-03T09:00`,
UTC unless it names its offset).
"""

from __future__ import annotations

import argparse
import re
from datetime import UTC, datetime, timedelta

from gpu_triage.cmd_incidents import _common, _positive, _structured, _time
from gpu_triage.record import who
from gpu_triage.settings import settings_of
from incidents.values import Incident, IncidentStatus

_DURATION = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?$")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    for verb, help_text in (
        ("ack", "acknowledge an incident: someone is on it"),
        ("snooze", "acknowledge an incident until a time; after it, the cause reopens it"),
        ("resolve", "resolve an incident by hand (its cause returning reopens it)"),
    ):
        p = subparsers.add_parser(verb, help=help_text)
        p.add_argument("id", type=_positive, metavar="ID", help="incident id")
        if verb == "snooze":
            p.add_argument(
                "--until",
                required=True,
                type=until,
                metavar="WHEN",
                help="a duration from now (30m, 2h, 1d) or a UTC time (2027-02-03T09:00)",
            )
        p.add_argument("--as", dest="by", metavar="WHO", help="who did it (default: your login)")
        _common(p)
        p.set_defaults(handler=_act, verb=verb, needs="incidents")


def until(text: str, *, now: datetime | None = None) -> datetime:
    """`text` as a UTC time: a duration from `now`, or an ISO time."""
    now = now or datetime.now(UTC)
    m = _DURATION.match(text.strip())
    if m and any(m.groups()):
        days, hours, minutes = (int(g or 0) for g in m.groups())
        span = timedelta(days=days, hours=hours, minutes=minutes)
        if not timedelta(0) < span <= timedelta(days=90):
            raise argparse.ArgumentTypeError("must be more than 0 and at most 90 days")
        return now + span
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not a duration (30m, 2h, 1d) or a time (2027-02-03T09:00): {text!r}"
        ) from None
    return when.replace(tzinfo=UTC) if when.tzinfo is None else when.astimezone(UTC)


def _act(args: argparse.Namespace) -> int:
    by = args.by or who()
    with settings_of(args).open_store(migrate=False) as store:
        if args.verb == "snooze":
            incident = store.snooze(args.id, until=args.until, by=by)
        else:
            status = IncidentStatus.ACKNOWLEDGED if args.verb == "ack" else IncidentStatus.RESOLVED
            incident = store.set_status(args.id, status, by=by)
        runs = store.runs(incident.id) if args.output in ("json", "yaml") else []
    if _structured({"incident": incident, "runs": runs}, args, kind="IncidentDetail"):
        return 0
    print(said(incident))
    return 0


def said(i: Incident) -> str:
    """One line: what the incident is now, by whom, since when."""
    if i.status is IncidentStatus.RESOLVED and i.resolved_at:
        return f"incident {i.id} ({i.workload}) resolved by {i.resolved_by or '-'} at {_time(i.resolved_at)} UTC"
    if i.snoozed_until is not None:
        return (
            f"incident {i.id} ({i.workload}) snoozed by {i.snoozed_by or '-'} until "
            f"{_time(i.snoozed_until)} UTC"
        )
    at = _time(i.acknowledged_at) if i.acknowledged_at else "-"
    return f"incident {i.id} ({i.workload}) acknowledged by {i.acknowledged_by or '-'} at {at} UTC"
