"""Incident groups: the fleet view's groups kept in the store, so that alerts about them are
posted once, updated in place and resolved, across restarts and replicas.

Coordination is the database's: a partial unique index allows one open group per cluster and
cause key (a replica that loses the race to open it retries and finds the winner's row), every
change bumps a version and is written `WHERE version = seen` (a replica that lost the race
changes nothing and so reports nothing), and posting is claimed by setting `posted_at` where it
is still NULL. Whoever a sync reports a change to is the one replica that acts on it.
"""

from __future__ import annotations

import builtins
import hashlib
import logging
from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import and_, exc, func, or_, select, update
from sqlalchemy.orm import Session

from incidents.database import Book
from incidents.models import GroupRow
from incidents.values import CLAIM_TTL, GroupChange, GroupIncident, ThreadRef
from triage.fleet import Group
from triage.model import Layer

log = logging.getLogger(__name__)

_ATTEMPTS = 5
OPEN, RESOLVED = "open", "resolved"


def members_of(group: Group) -> list[dict[str, object]]:
    return [
        {"namespace": m.namespace, "name": m.name, "kind": m.kind, "gpus": m.gpus}
        for m in group.members
    ]


def members_hash(members: Iterable[dict[str, object]]) -> str:
    names = sorted(f"{m['namespace']}/{m['name']}" for m in members)
    return hashlib.sha256("\n".join(names).encode()).hexdigest()[:32]


class GroupBook(Book):
    """The store's incident groups. Obtained as `IncidentStore.groups`."""

    def sync(self, cluster: str, groups: Iterable[Group]) -> list[GroupChange]:
        """Make the open groups of `cluster` the given ones: open new ones, update those whose
        members changed, resolve those that are gone. Returns the changes this call made."""
        wanted = {g.key: g for g in groups}
        with self._guard():
            for attempt in range(1, _ATTEMPTS + 1):
                try:
                    with self._write.begin() as session:
                        return self._sync(session, cluster, wanted)
                except exc.IntegrityError:
                    if attempt == _ATTEMPTS:
                        raise
                    log.info("incident group of %s raced with another writer; retrying", cluster)
        raise AssertionError("unreachable")

    def _sync(self, session: Session, cluster: str, wanted: dict[str, Group]) -> list[GroupChange]:
        now = self._clock()
        rows = session.scalars(
            select(GroupRow).where(GroupRow.cluster == cluster, GroupRow.status == OPEN)
        ).all()
        active = {r.key: r for r in rows}
        changes: list[GroupChange] = []
        for key, group in wanted.items():
            members = members_of(group)
            digest = members_hash(members)
            row = active.get(key)
            if row is None:
                row = GroupRow(
                    cluster=cluster, key=key, status=OPEN, layer=group.layer.value,
                    code=group.code, cause=group.cause,
                    owner_team=group.owner.team if group.owner else None,
                    owner_channel=group.owner.channel if group.owner else None,
                    workloads=group.workloads, gpus=group.gpus, members=members,
                    members_hash=digest, version=1, opened_at=now, updated_at=now,
                    announced_workloads=group.workloads,
                )  # fmt: skip
                session.add(row)
                session.flush()  # the unique index decides here who opened it
                changes.append(GroupChange(kind="opened", group=_value(row)))
            elif row.members_hash != digest or row.gpus != group.gpus:
                before = row.workloads
                values = {"workloads": group.workloads, "gpus": group.gpus, "members": members,
                          "members_hash": digest, "cause": group.cause, "updated_at": now}  # fmt: skip
                if self._bump(session, row, values):
                    changes.append(
                        GroupChange(kind="changed", group=_value(row), previous_workloads=before)
                    )
        for key, row in active.items():
            if key in wanted:
                continue
            before = row.workloads
            values = {"status": RESOLVED, "resolved_at": now, "updated_at": now,
                      "workloads": 0, "gpus": 0, "members": [], "members_hash": members_hash([])}  # fmt: skip
            if self._bump(session, row, values):
                changes.append(
                    GroupChange(kind="resolved", group=_value(row), previous_workloads=before)
                )
        return changes

    @staticmethod
    def _bump(session: Session, row: GroupRow, values: dict[str, object]) -> bool:
        """Write `values` if nobody changed the row since it was read (True when written)."""
        seen = row.version
        done = session.execute(
            update(GroupRow)
            .where(GroupRow.id == row.id, GroupRow.version == seen)
            .values(**values, version=seen + 1)
            .execution_options(synchronize_session=False)
        )
        if done.rowcount != 1:  # type: ignore[attr-defined]
            return False
        session.refresh(row)
        return True

    def claim_post(self, group_id: int, *, channel: str) -> GroupIncident | None:
        """Claim the first post about a group (None when another caller has it already). A
        claim older than `CLAIM_TTL` that never got its thread was left by a replica that
        died before posting: it can be claimed again."""
        now = self._clock()
        unclaimed = or_(
            GroupRow.posted_at.is_(None),
            and_(GroupRow.thread.is_(None), GroupRow.posted_at < now - CLAIM_TTL),
        )
        with self._guard(), self._write.begin() as session:
            done = session.execute(
                update(GroupRow)
                .where(GroupRow.id == group_id, unclaimed)
                .values(posted_at=now, channel=channel)
            )
            if done.rowcount != 1:  # type: ignore[attr-defined]
                return None
            row = session.get(GroupRow, group_id)
            return None if row is None else _value(row)

    def release_post(self, group_id: int) -> None:
        """Give a claim back after the post failed, so a later cycle tries again."""
        with self._guard(), self._write.begin() as session:
            session.execute(
                update(GroupRow)
                .where(GroupRow.id == group_id, GroupRow.thread.is_(None))
                .values(posted_at=None, chat=None, channel=None)
            )

    def attach_thread(self, group_id: int, *, thread: ThreadRef) -> None:
        with self._guard(), self._write.begin() as session:
            session.execute(
                update(GroupRow)
                .where(GroupRow.id == group_id)
                .values(chat=thread.chat, channel=thread.channel, thread=thread.thread)
            )

    def claim_announce(self, group_id: int, *, seen: int, workloads: int) -> bool:
        """Claim the one broadcast about a group's growth from `seen` to `workloads`."""
        with self._guard(), self._write.begin() as session:
            done = session.execute(
                update(GroupRow)
                .where(GroupRow.id == group_id, GroupRow.announced_workloads == seen)
                .values(announced_workloads=workloads)
            )
            return bool(done.rowcount == 1)  # type: ignore[attr-defined]

    def posts_since(self, channel: str, since: datetime) -> int:
        """Groups first posted to `channel` since `since` (a channel's rate limit)."""
        with self._guard(), self._read() as session:
            return int(
                session.scalar(
                    select(func.count())
                    .select_from(GroupRow)
                    .where(GroupRow.channel == channel, GroupRow.posted_at >= since)
                )
                or 0
            )

    def get(self, group_id: int) -> GroupIncident | None:
        with self._guard(), self._read() as session:
            row = session.get(GroupRow, group_id)
            return None if row is None else _value(row)

    def find(self, cluster: str, key: str) -> GroupIncident | None:
        """The open group of that cause, if any."""
        with self._guard(), self._read() as session:
            row = session.scalars(
                select(GroupRow).where(
                    GroupRow.cluster == cluster, GroupRow.key == key, GroupRow.status == OPEN
                )
            ).first()
            return None if row is None else _value(row)

    def open_by_key(self, cluster: str) -> dict[str, GroupIncident]:
        """Every open group of `cluster`, by cause key (one read)."""
        with self._guard(), self._read() as session:
            rows = session.scalars(
                select(GroupRow).where(GroupRow.cluster == cluster, GroupRow.status == OPEN)
            ).all()
            return {r.key: _value(r) for r in rows}

    def list(
        self, *, status: str | None = None, cluster: str | None = None, limit: int = 50
    ) -> builtins.list[GroupIncident]:
        """Groups, most recently opened first."""
        query = select(GroupRow)
        if status is not None:
            query = query.where(GroupRow.status == status)
        if cluster is not None:
            query = query.where(GroupRow.cluster == cluster)
        query = query.order_by(GroupRow.opened_at.desc(), GroupRow.id.desc()).limit(max(limit, 0))
        with self._guard(), self._read() as session:
            return [_value(r) for r in session.scalars(query).all()]

    def counts(self, *, cluster: str | None = None) -> dict[str, int]:
        """Open and resolved groups (of every cluster, or of `cluster`)."""
        query = select(GroupRow.status, func.count()).group_by(GroupRow.status)
        if cluster is not None:
            query = query.where(GroupRow.cluster == cluster)
        with self._guard(), self._read() as session:
            rows = session.execute(query).all()
        found = {status: int(n) for status, n in rows}
        return {OPEN: found.get(OPEN, 0), RESOLVED: found.get(RESOLVED, 0)}


def _value(row: GroupRow) -> GroupIncident:
    return GroupIncident(
        id=row.id, cluster=row.cluster, key=row.key, status=row.status, layer=Layer(row.layer),
        code=row.code, cause=row.cause, owner_team=row.owner_team,
        owner_channel=row.owner_channel, workloads=row.workloads, gpus=row.gpus,
        members=list(row.members or []), version=row.version, opened_at=row.opened_at,
        updated_at=row.updated_at, resolved_at=row.resolved_at, chat=row.chat,
        channel=row.channel, thread=row.thread, posted_at=row.posted_at,
        announced_workloads=row.announced_workloads,
    )  # fmt: skip
