"""The incident rules, applied to every triage in one transaction (`IncidentStore.record`):

- blocked, same cause as the workload's open incident: the run is appended to it;
- blocked, different cause: the old incident is resolved as *superseded* and a new one opens
  (so "open now" always shows each workload's current cause, once);
- not blocked: open incidents for the workload are resolved automatically, the run appended;
  with nothing open the run is kept on its own;
- blocked again by the cause of a resolved incident: that incident is reopened (the run
  appended), not opened anew, so a flapping cause is one incident with its history;
- a snoozed incident whose snooze has passed is open again at the next run that finds its
  cause.

The workload is the one the report resolved (`PodRef.key`: a pod's outermost owner), so a
triage of a pod, of its StatefulSet and a sweep that lists the StatefulSet share one incident.
Incidents recorded before reports named their workload were keyed by what was typed: a run
still finds those by that name.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import ColumnElement, and_, or_, select
from sqlalchemy.orm import Session

from incidents.models import IncidentRow, TriageRunRow
from incidents.values import Incident, IncidentStatus, RecordResult, Resolution
from triage.model import Answer, Layer, TriageReport


def record_run(
    session: Session,
    report: TriageReport,
    *,
    requested_by: str | None,
    duration_ms: float,
    channel: str | None,
    source: str,
    now: datetime,
) -> RecordResult:
    """Record `report` as a run and open, continue or resolve the workload's incident."""
    target, resolved = _settle(_active(session, report), report, now=now, by=requested_by)
    session.flush()  # resolutions first: the unique index then admits a new incident
    created = False
    if report.blocked and target is None and report.answer != Answer.UNKNOWN:
        target = _reopened(session, report, now=now)
        if target is None:
            target = _opened(report, now=now, by=requested_by, channel=channel, chat=source)
            session.add(target)
            created = True
    elif target is not None and report.blocked and _snooze_over(target, now):
        target.status, target.snoozed_until = IncidentStatus.OPEN.value, None
    if target is not None:
        target.run_count += 1
        target.updated_at = now
        if target.status != IncidentStatus.RESOLVED.value or created:
            _refresh(target, report)
    ref = report.pod
    run = TriageRunRow(
        cluster=report.cluster,
        namespace=ref.namespace,
        kind=ref.kind,
        name=ref.name,
        pod=ref.pod,
        failing_layer=_layer_value(report.failing_layer),
        fingerprint=report.fingerprint,
        headline=report.headline,
        report=report.model_dump(mode="json"),
        duration_ms=duration_ms,
        created_at=now,
        requested_by=requested_by,
        channel=channel,
        source=source,
    )
    session.flush()
    run.incident_id = target.id if target is not None else None
    session.add(run)
    session.flush()
    return RecordResult(
        incident=incident_of(target) if target is not None else None,
        created=created,
        auto_resolved=resolved,
        run_id=run.id,
    )


def _keyed(report: TriageReport) -> ColumnElement[bool]:
    """The workload's incidents: by the workload it resolved to, or by what was typed."""
    ref = report.pod
    keys = {ref.key, (ref.kind, ref.name)}
    return and_(
        IncidentRow.cluster == report.cluster,
        IncidentRow.namespace == ref.namespace,
        or_(*(and_(IncidentRow.kind == k, IncidentRow.name == n) for k, n in sorted(keys))),
    )


def _active(session: Session, report: TriageReport) -> Sequence[IncidentRow]:
    """The workload's unresolved incidents, locked for this transaction."""
    return session.scalars(
        select(IncidentRow)
        .where(_keyed(report), IncidentRow.status != IncidentStatus.RESOLVED.value)
        .order_by(IncidentRow.id)
        .with_for_update()
    ).all()


def _reopened(session: Session, report: TriageReport, *, now: datetime) -> IncidentRow | None:
    """The workload's latest resolved incident of this cause, reopened (None: there is none)."""
    row = session.scalars(
        select(IncidentRow)
        .where(
            _keyed(report),
            IncidentRow.status == IncidentStatus.RESOLVED.value,
            IncidentRow.fingerprint == report.fingerprint,
        )
        .order_by(IncidentRow.resolved_at.desc(), IncidentRow.id.desc())
        .limit(1)
        .with_for_update()
    ).first()
    if row is None:
        return None
    row.status = IncidentStatus.OPEN.value
    row.resolved_at = row.resolved_by = row.resolution = None
    row.acknowledged_at = row.acknowledged_by = row.snoozed_until = row.snoozed_by = None
    row.reopened_at, row.reopen_count = now, (row.reopen_count or 0) + 1
    kind, name = report.pod.key
    row.kind, row.name = kind, name  # an old pod-keyed incident moves to its workload
    return row


def _snooze_over(row: IncidentRow, now: datetime) -> bool:
    return row.snoozed_until is not None and row.snoozed_until <= now


def _settle(
    active: Sequence[IncidentRow], report: TriageReport, *, now: datetime, by: str | None
) -> tuple[IncidentRow | None, builtins.list[int]]:
    """The incident the run belongs to among the `active` ones (None: a new one, or none),
    and the ids of those it resolves: superseded by another cause, or running now."""
    resolved: builtins.list[int] = []
    target: IncidentRow | None = None
    for row in active:
        if report.answer == Answer.UNKNOWN:  # a run that could not judge neither opens nor resolves
            target = target or row
            continue
        if report.blocked and row.fingerprint == report.fingerprint and target is None:
            target = row
            continue
        why = Resolution.SUPERSEDED if report.blocked else Resolution.AUTO
        resolve(row, at=now, by=by, resolution=why)
        resolved.append(row.id)
        if not report.blocked:
            target = row  # the run that found the workload running belongs to it
    return target, resolved


def _opened(
    report: TriageReport, *, now: datetime, by: str | None, channel: str | None, chat: str
) -> IncidentRow:
    """A new incident for the workload, asked about in `channel` of `chat` (if in a chat)."""
    ref = report.pod
    kind, name = ref.key
    return IncidentRow(
        cluster=report.cluster,
        namespace=ref.namespace,
        kind=kind,
        name=name,
        fingerprint=report.fingerprint,
        status=IncidentStatus.OPEN.value,
        opened_at=now,
        requested_by=by,
        chat=None if channel is None else chat,
        channel=channel,
        run_count=0,
        reopen_count=0,
    )


def resolve(row: IncidentRow, *, at: datetime, by: str | None, resolution: Resolution) -> None:
    row.status = IncidentStatus.RESOLVED.value
    row.resolved_at, row.resolved_by, row.resolution = at, by, resolution.value
    row.updated_at = at


def _refresh(row: IncidentRow, report: TriageReport) -> None:
    """Latest view of an incident still being followed: examined pod, headline, owner."""
    row.pod = report.pod.pod or (report.pod.name if report.pod.kind == "Pod" else row.pod)
    kind, name = report.pod.key
    row.kind, row.name = kind, name  # what was typed before workloads were resolved: moved
    row.failing_layer = _layer_value(report.failing_layer) or row.failing_layer
    row.headline = report.headline
    if report.owner is not None:
        row.owner_team = report.owner.team
        row.owner_channel = report.owner.channel
        row.owner_usergroup = report.owner.usergroup


def _layer_value(layer: Layer | None) -> str | None:
    return layer.value if layer is not None else None


def incident_of(row: IncidentRow) -> Incident:
    return Incident.model_validate(row, from_attributes=True)
