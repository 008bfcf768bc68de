"""A sweep: every stuck GPU workload in scope triaged, and the answers grouped by root cause.

Each stuck workload (`triage.fleet.stuck`) is triaged by the engine as if a user had asked;
the reports are grouped by their cause: the same failing layer and signal, and the same
blocking objects (the same broken nodes, node pool, ResourceQuota, ClusterQueue, missing
label). Groups sort by GPUs waiting, so the cause that holds back the most GPUs comes first.

A sweep reads the cluster once: events are listed once for all the triages, and the layers
share work across them (`SweepSource`). With a `FleetMemo` (the bot's watch loop keeps one per
cluster), a workload whose reads are unchanged since the last sweep keeps its answer: after
one change in the cluster, only the workloads that change touches are triaged again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

from triage import engine
from triage.assemble import Judged
from triage.cluster.collector import paused
from triage.cluster.objects import meta, name_of, ns_of
from triage.cluster.reads import Key, ReadLog
from triage.cluster.source import (
    ClusterSource,
    DeadlineExceededError,
    NotFoundError,
    SourceError,
)
from triage.config import EngineConfig
from triage.fleet.model import Group, Member, Sweep, describe_cause, group_totals
from triage.fleet.reuse import Current, FleetMemo, Kept
from triage.fleet.source import SweepSource
from triage.fleet.stuck import Stuck, stuck_workloads
from triage.layers.base import VIEW, Context
from triage.layers.scheduling.shared import shapes_in, shared_evaluation
from triage.model import Answer, Cause, Layer, OwnerRoute, shared_fields
from triage.names import InvalidNameError
from triage.playbooks import Playbook, load_playbook
from triage.target import Target
from triage.vendors.nvidia import PRODUCT

# Labels that name a node's pool, after the playbook's own: a group of full nodes is named
# by its pool, not by the thousand nodes in it.
POOL_FALLBACK = (PRODUCT, "node.kubernetes.io/instance-type")


def sweep(
    source: ClusterSource,
    *,
    namespaces: Iterable[str] | None = None,
    config: EngineConfig | None = None,
    playbook: Playbook | None = None,
    now: datetime | None = None,
    memo: FleetMemo | None = None,
) -> Sweep:
    """Triage every stuck GPU workload in scope and group the answers by root cause.

    With `memo`, answers whose reads are unchanged since the sweep that made them are kept
    (see `triage.fleet.reuse`); the sweep counts what it triaged and what it kept.

    The cyclic GC is paused meanwhile (`triage.cluster.collector`): a sweep makes hundreds of
    thousands of short-lived objects and no cycles, and each full collection it set off would
    walk the whole cache (0.4-0.6 s a sweep at 20,000 nodes)."""
    with paused():
        return _sweep(source, namespaces, config, playbook, now, memo)


def _sweep(
    source: ClusterSource,
    namespaces: Iterable[str] | None,
    config: EngineConfig | None,
    playbook: Playbook | None,
    now: datetime | None,
    memo: FleetMemo | None,
) -> Sweep:
    playbook = playbook or load_playbook()
    config = config or EngineConfig()
    shared = SweepSource(source)
    stamp = now or source.as_of or datetime.now(UTC)
    scope = None if namespaces is None else list(namespaces)
    unread: list[str] = []
    items = stuck_workloads(shared, scope, unread=unread, found_one=shared.read_events_ahead)
    listing_failed = bool(unread)
    run = _Run(shared, config=config, playbook=playbook, now=now, memo=memo)
    pools = _Pools(shared, playbook.node_pools.labels)
    keys: dict[tuple[Any, ...], tuple[Any, str]] = {}
    groups: dict[str, _Gathered] = {}
    waiting: dict[tuple[str, str], Member] = {}
    unknown: dict[tuple[str, str], Member] = {}
    left_out: dict[str, int] = {}  # what the triages could not read: for how many workloads
    cluster = source.cluster_name
    for item, verdict, fresh in run.each(items):
        member = shared_fields(
            Member(
                namespace=item.namespace,
                name=item.name,
                kind=item.kind,
                pods=item.pods,
                gpus=item.gpus,
                since=item.since,
                headline=verdict.headline,
            )
        )
        for line in _unread_lines(verdict):
            left_out[line] = left_out.get(line, 0) + 1
        if verdict.answer == Answer.UNKNOWN or verdict.failing_layer is None:
            listed = unknown if verdict.answer == Answer.UNKNOWN else waiting
            held_member = listed.get((item.namespace, item.name))
            listed[(item.namespace, item.name)] = (
                member if held_member is None else _merged(held_member, member)
            )
            continue
        key = _cause_key(cluster, item.namespace, verdict, pools, keys)
        gathered = groups.get(key)
        if gathered is None:
            gathered = groups[key] = _Gathered(item.namespace, verdict)
        gathered.add((item.namespace, item.name), member, verdict, fresh)
    if memo is not None:
        memo.finish(
            {i.key for i in items},
            namespaces=scope,
            redo=dict(shapes_in(shared.state.shared)),
        )
    if shared.events_failed is not None:
        unread.append(f"{shared.events_failed}: events are not used as evidence")
    built = [
        _group(source.cluster_name, key, found, pools, playbook) for key, found in groups.items()
    ]
    built.sort(key=lambda g: (-g.gpus, -g.workloads, g.layer.rank, g.key))
    return Sweep(
        cluster=source.cluster_name,
        generated_at=stamp,
        groups=built,
        waiting=group_totals(list(waiting.values()))["members"] if waiting else [],
        unknown=group_totals(list(unknown.values()))["members"] if unknown else [],
        unread=unread + [f"{line} for {n} workload(s)" for line, n in left_out.items()],
        listing_failed=listing_failed,
        errors=run.errors,
        triaged=run.triaged,
        reused=run.reused,
    )


def _merged(a: Member, b: Member) -> Member:
    times = [t for t in (a.since, b.since) if t is not None]
    return shared_fields(
        a.model_copy(
            update={
                "pods": a.pods + b.pods,
                "gpus": a.gpus + b.gpus,
                "since": min(times, default=None),
            }
        )
    )


def _unread_lines(verdict: Judged) -> list[str]:
    """What one triage could not read, as the sweep says it (no workload named)."""
    return [
        u.message + (f": {', '.join(la.value for la in u.layers)} not judged" if u.layers else "")
        for u in verdict.unread
    ]


class _Run:
    """The triages of one sweep, keeping what still holds when a memo is given."""

    def __init__(
        self,
        source: SweepSource,
        *,
        config: EngineConfig,
        playbook: Playbook,
        now: datetime | None,
        memo: FleetMemo | None,
    ) -> None:
        self.source, self.config, self.playbook, self.now = source, config, playbook, now
        self.memo = memo
        self.clock = datetime.now(UTC)  # the age of kept answers is wall-clock time
        self.errors: list[str] = []
        self.triaged = self.reused = 0

    def each(self, items: list[Stuck]) -> Iterator[tuple[Stuck, Judged, bool]]:
        """Each item that has a verdict, in order, with it and whether this sweep triaged it
        (rather than kept it). Without a memo, each verdict is made as it is asked for: the
        sweep then holds the verdicts of its groups' first workloads only, not thousands."""
        if self.memo is None:
            for item in items:
                found = self._triage(item)
                if found is not None:
                    yield item, found, True
            return
        verdicts, fresh = self._kept_or_triaged(self.memo, items)
        for item in items:
            found = verdicts.get(item.key)
            if found is not None:
                yield item, found, item.key in fresh

    def _kept_or_triaged(
        self, memo: FleetMemo, items: list[Stuck]
    ) -> tuple[dict[tuple[str, str], Judged], set[tuple[str, str]]]:
        """Every item's verdict, kept or triaged again, and which were triaged."""
        verdicts: dict[tuple[str, str], Judged] = {}
        fresh: set[tuple[str, str]] = set()

        def triage(item: Stuck) -> None:
            found = self._triage(item)
            if found is not None:
                verdicts[item.key] = found
                fresh.add(item.key)

        def keep(item: Stuck, kept: Kept) -> None:
            verdicts[item.key] = kept.verdict
            self.reused += 1

        memo.start((self.config, self.playbook))
        current = Current(self.source, self._redo)
        # First the workloads whose own reads changed: their triages redo the shared work
        # (a shape's evaluation, the stack view) that the others then compare digests with;
        # what no triage redid is redone on its own (`_redo`).
        later: list[tuple[Stuck, Kept]] = []
        for item in items:
            kept = memo.candidate(item.key, self.clock)
            holds = None if kept is None else current.holds(kept, shared=False)
            if kept is None or holds is False:
                triage(item)
            elif holds:
                keep(item, kept)
            else:
                later.append((item, kept))
        for item, kept in later:
            if current.holds(kept, shared=True):
                keep(item, kept)
            else:
                triage(item)
        return verdicts, fresh

    def _redo(self, key: Key) -> None:
        """Redo one piece of shared work a kept answer rests on, so its digest is known: the
        stack view, or the evaluation of every node for one pod shape."""
        assert self.memo is not None
        placement = self.memo.redo.get(key)
        if key[0] != VIEW[0] and placement is None:
            return  # the triage of a workload that needs it will
        pod = placement.pod if placement is not None else {}
        target = Target(ns_of(pod), name_of(pod), "Pod", pod or None, [pod] if pod else [])
        now = self.now or self.source.as_of or datetime.now(UTC)
        ctx = Context(
            source=self.source, config=self.config, target=target, now=now,
            sweep=self.source.state,
        )  # fmt: skip
        try:
            if placement is None:
                _ = ctx.view
            else:
                shared_evaluation(ctx, key[1], placement)
        except SourceError:
            return  # unknown digest: the workload is triaged, and its triage says what failed

    def _triage(self, item: Stuck) -> Judged | None:
        """The item's verdict; None when it is gone or could not be read (then in `errors`)."""
        state = self.source.state
        log = state.log = ReadLog() if self.memo is not None else None
        try:
            found = engine.sweep_verdict(
                self.source,
                namespace=item.namespace,
                name=item.key[1],
                config=self.config,
                playbook=self.playbook,
                now=self.now,
                sweep=state,
            )
        except NotFoundError:
            return None  # gone between the listing and its triage
        except DeadlineExceededError:
            raise  # the command is over: no workload after this one could be read either
        except SourceError as e:
            self.errors.append(f"{item.namespace}/{item.name}: {e}")
            return None
        except InvalidNameError as e:  # a snapshot's object no API server would store
            self.errors.append(f"{item.namespace or '(no namespace)'}/{item.name}: {e}")
            return None
        finally:
            state.log = None
        self.triaged += 1
        if self.memo is not None and log is not None:
            self.memo.keep(item.key, found, log, self.clock)
        return found


class _Pools:
    """The pool each node belongs to (its value of the playbook's pool labels, else of
    POOL_FALLBACK), read once per sweep, on first use."""

    def __init__(self, source: ClusterSource, labels: Iterable[str]) -> None:
        self._source, self._keys = source, (*labels, *POOL_FALLBACK)
        self._index: dict[str, str] | None = None
        # id of a node list -> (the list, its pools): verdicts of one shape share their
        # cause and its node list (`assemble._cause`), thousands of names for a full pool
        self._seen: dict[int, tuple[list[str], list[str]]] = {}

    def of(self, nodes: list[str]) -> list[str]:
        """The pools of `nodes`, sorted (a cause blocking on thousands of nodes of one pool
        names one pool)."""
        hit = self._seen.get(id(nodes))
        if hit is not None and hit[0] is nodes:
            return hit[1]
        self._seen[id(nodes)] = (nodes, pools := self._of(nodes))
        return pools

    def _of(self, nodes: list[str]) -> list[str]:
        index = self._index
        if index is None:
            index = self._index = {}
            for n in self._source.objects("Node"):
                lab = meta(n).get("labels") or {}
                index[name_of(n)] = next(
                    (f"{k}={lab[k]}" for k in self._keys if lab.get(k)), "unlabelled nodes"
                )
        found = set(map(index.get, nodes))
        if None in found:
            found.discard(None)
            found.add("unknown nodes")
        return sorted(found)  # type: ignore[arg-type]


def _blocking(namespace: str, verdict: Judged, pools: _Pools) -> list[str]:
    """The objects a cause is about, as its group key: the pools of the nodes where it blocks
    (pods differ in which nodes of a pool they may use, not in why: one driver crash across a
    pool is one cause), and the quota, queue, label or request the failing signals name."""
    cause = verdict.cause
    if cause is None:
        return []
    if cause.nodes:
        return [*cause.objects, *(f"pool {p}" for p in pools.of(cause.nodes))]
    if _names_namespace(cause):
        return [f"namespace {namespace}"]
    return list(cause.objects)


def _names_namespace(cause: Cause) -> bool:
    """Whether a cause is named by the namespace of the workload it blocks: a quota cause
    that names no quota, queue or node (the namespace's own limit)."""
    return cause.layer == Layer.QUOTA and not cause.objects and not cause.nodes


def _cause_key(
    cluster: str,
    namespace: str,
    verdict: Judged,
    pools: _Pools,
    seen: dict[tuple[Any, ...], tuple[Any, str]],
) -> str:
    """The key of a verdict's group; verdicts blocked alike share their cause (`assemble`),
    so each cause's key is worked out once a sweep (`seen`), and once per namespace only for
    a cause the namespace names (`_blocking`)."""
    cause = verdict.cause
    named = cause is not None and _names_namespace(cause)
    at = (id(cause), cluster, verdict.failing_layer, namespace if named else None)
    hit = seen.get(at)
    if hit is not None and hit[0] is cause:
        return hit[1]
    code = cause.code if cause is not None else ""
    raw = "|".join(
        [cluster, str(verdict.failing_layer), code, *_blocking(namespace, verdict, pools)]
    )
    key = hashlib.sha256(raw.encode()).hexdigest()[:16]
    seen[at] = (cause, key)
    return key


class _Gathered:
    """One group as a sweep gathers it: the first verdict with its cause, each workload's
    member (and whether this sweep triaged it), and of the other verdicts only what the group
    says of them all (their owner routes; the nodes of a driver or device-plugin cause)."""

    __slots__ = ("first", "namespace", "nodes", "owners", "rows")

    def __init__(self, namespace: str, first: Judged) -> None:
        self.namespace, self.first = namespace, first
        self.nodes: set[str] = set()
        self.owners: set[OwnerRoute | None] = set()
        self.rows: dict[tuple[str, str], tuple[Member, bool]] = {}

    def add(self, at: tuple[str, str], member: Member, verdict: Judged, fresh: bool) -> None:
        cause = verdict.cause
        if cause is not None and verdict.failing_layer in (Layer.DRIVER, Layer.DEVICE_PLUGIN):
            self.nodes.update(cause.nodes)
        self.owners.add(verdict.owner)
        held = self.rows.get(at)
        if held is not None:  # the workload's pods stuck in two places, for one cause
            member, fresh = _merged(held[0], member), fresh or held[1]
        self.rows[at] = (member, fresh)


def _group(cluster: str, key: str, found: _Gathered, pools: _Pools, playbook: Playbook) -> Group:
    verdict = found.first
    assert verdict.failing_layer is not None and verdict.cause is not None
    blocking = _blocking(found.namespace, verdict, pools)
    if verdict.failing_layer in (Layer.DRIVER, Layer.DEVICE_PLUGIN):
        # The broken nodes themselves are the platform's to fix: name every one.
        blocking += [f"node {n}" for n in sorted(found.nodes)]
    # Members whose namespaces route to different teams: the cause is shared, so it goes to
    # the owner of the layer (or of the signal), not to one tenant's team.
    owner = (
        verdict.owner
        if len(found.owners) == 1
        else playbook.route(verdict.failing_layer, codes=[verdict.cause.code])
    )
    rows = found.rows.values()
    return Group(
        key=key,
        cluster=cluster,
        layer=verdict.failing_layer,
        code=verdict.cause.code,
        cause=describe_cause(verdict.cause.code, blocking, verdict.cause.vendor),
        blocking=blocking,
        owner=owner,
        triaged=sum(fresh for _, fresh in rows),
        **group_totals([m for m, _ in rows]),
    )
