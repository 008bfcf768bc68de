"""The incident rules, applied to every triage in one transaction (`IncidentStore.record`):

- blocked, same cause as the workload's open incident: the run is appended to it;
- blocked, different cause: the old incident is resolved as *superseded* and a new one opens
  (so "open now" always shows each workload's current cause, once);
- not blocked: open incidents for the workload are resolved automatically, the run appended;
  with nothing open the run is kept on its own.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import select
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
        target = _opened(report, now=now, by=requested_by, channel=channel, chat=source)
        session.add(target)
        created = True
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


def _active(session: Session, report: TriageReport) -> Sequence[IncidentRow]:
    """The workload's unresolved incidents, locked for this transaction."""
    ref = report.pod
    return session.scalars(
        select(IncidentRow)
        .where(
            IncidentRow.cluster == report.cluster,
            IncidentRow.namespace == ref.namespace,
            IncidentRow.kind == ref.kind,
            IncidentRow.name == ref.name,
            IncidentRow.status != IncidentStatus.RESOLVED.value,
        )
        .order_by(IncidentRow.id)
        .with_for_update()
    ).all()


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
    return IncidentRow(
        cluster=report.cluster,
        namespace=ref.namespace,
        kind=ref.kind,
        name=ref.name,
        fingerprint=report.fingerprint,
        status=IncidentStatus.OPEN.value,
        opened_at=now,
        requested_by=by,
        chat=None if channel is None else chat,
        channel=channel,
        run_count=0,
    )


def resolve(row: IncidentRow, *, at: datetime, by: str | None, resolution: Resolution) -> None:
    row.status = IncidentStatus.RESOLVED.value
    row.resolved_at, row.resolved_by, row.resolution = at, by, resolution.value
    row.updated_at = at


def _refresh(row: IncidentRow, report: TriageReport) -> None:
    """Latest view of an incident still being followed: examined pod, headline, owner."""
    row.pod = report.pod.pod or (report.pod.name if report.pod.kind == "Pod" else row.pod)
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
