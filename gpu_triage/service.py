"""One triage, end to end, for every adapter: read the cluster, explain, time, record, count.

The Slack bot, the CLI's `--record` and `ask` (in a terminal or in Slack, with or without a
language model) all go through `TriageService`, with the cluster passed through: `run` is a
recorded triage, `report` the engine's answer alone (what `ask`'s checks read), `record` the
recording half of `run` (the CLI's `pending --record` triages a sweep's workloads itself).

Engine errors (bad name, unknown pod, unreachable cluster) propagate: the caller owns the
wording. A failure of the incident store never hides the answer: the report comes back with
`store_error` set, and the failure is logged.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from threading import Lock
from typing import TYPE_CHECKING, Protocol

from incidents.errors import IncidentStoreError
from incidents.values import Incident
from triage import ClusterSource, EngineConfig, Playbook, SourceStatus, TriageReport
from triage import triage as engine_triage
from triage.fleet import FleetMemo, Sweep, sweep
from triage.verify.node import NodeVerification, verify_node

if TYPE_CHECKING:
    from gpu_triage.metrics import Metrics  # prometheus_client: the bot's extra
    from incidents.store import IncidentStore  # SQLAlchemy loads only when a store is used

log = logging.getLogger(__name__)


class TriageFn(Protocol):
    def __call__(
        self,
        source: ClusterSource,
        *,
        namespace: str,
        name: str,
        config: EngineConfig | None = None,
        playbook: Playbook | None = None,
        nodes: bool = False,
    ) -> TriageReport: ...


SourceFor = Callable[[str | None], ClusterSource]


@dataclass(frozen=True)
class Asked:
    """Who asked for a triage (None: nobody known), in which channel, and through what: the
    chat's name (`slack`), or `cli`."""

    by: str | None
    channel: str | None = None
    via: str = "slack"


@dataclass(frozen=True)
class TriageRun:
    """A triage answer and what happened to its record.

    `incident` is the incident the run belongs to (None when nothing was stored or nothing was
    open and the workload runs); `store_error` is a one-line reason when recording failed.
    """

    report: TriageReport
    incident: Incident | None
    created: bool
    store_error: str | None
    duration_ms: float
    auto_resolved: list[int] = field(default_factory=list)
    store_fault: str | None = None  # the kind of fault (`incidents.errors.Fault`), tenant-safe


class TriageService:
    def __init__(
        self,
        *,
        source_for: SourceFor,
        config: EngineConfig | None = None,
        playbook: Playbook | None = None,
        store: IncidentStore | None = None,
        metrics: Metrics | None = None,
        triage_fn: TriageFn = engine_triage,
        timer: Callable[[], float] = time.perf_counter,
        statuses: Callable[[], Sequence[SourceStatus]] | None = None,
    ) -> None:
        self.source_for = source_for
        self._statuses = statuses
        self.config = config or EngineConfig()
        self.playbook = playbook
        self.store = store
        self.metrics = metrics
        self._triage = triage_fn
        self._timer = timer
        self._memos: dict[str, tuple[Lock, FleetMemo]] = {}
        self._memo_lock = Lock()

    def report(
        self, *, cluster: str | None, namespace: str, name: str, nodes: bool = False
    ) -> TriageReport:
        """The engine's answer for one workload of `cluster` (None: the default), neither
        timed nor recorded; with `nodes`, every node's figures (`TriageReport.nodes`)."""
        return self._triage(
            self.source_for(cluster),
            namespace=namespace,
            name=name,
            config=self.config,
            playbook=self.playbook,
            nodes=nodes,
        )

    def run(
        self,
        *,
        cluster: str | None,
        namespace: str,
        name: str,
        requested_by: str | None,
        channel: str | None = None,
        via: str = "slack",
        nodes: bool = False,
    ) -> TriageRun:
        """A triage timed, counted and recorded (`via`: the chat it was asked in, or "cli")."""
        started = self._timer()
        report = self.report(cluster=cluster, namespace=namespace, name=name, nodes=nodes)
        duration_ms = (self._timer() - started) * 1000.0
        if self.metrics is not None:
            self.metrics.observe(report, duration_ms=duration_ms)
        asked = Asked(requested_by, channel, via)
        return self.record(report, asked=asked, duration_ms=duration_ms)

    def record(self, report: TriageReport, *, asked: Asked, duration_ms: float) -> TriageRun:
        """Record a triage made elsewhere; a store failure is the run's `store_error`."""
        if self.store is None:
            return TriageRun(report, None, False, None, duration_ms)
        namespace, name = report.pod.namespace, report.pod.name
        try:
            result = self.store.record(
                report,
                requested_by=asked.by,
                duration_ms=duration_ms,
                channel=asked.channel,
                source=asked.via,
            )
        except IncidentStoreError as e:
            log.error("triage of %s/%s not recorded: %s", namespace, name, e)
            fault = getattr(e, "fault", "unavailable")
            return TriageRun(report, None, False, str(e), duration_ms, store_fault=str(fault))
        except Exception as e:  # a store bug must not swallow the user's answer either
            log.exception("triage of %s/%s not recorded", namespace, name)
            return TriageRun(
                report, None, False, f"internal error: {type(e).__name__}", duration_ms,
                store_fault="unavailable",
            )  # fmt: skip
        return TriageRun(
            report, result.incident, result.created, None, duration_ms, result.auto_resolved
        )

    def sweep(self, *, cluster: str | None, namespaces: list[str] | None = None) -> Sweep:
        """Every stuck GPU workload in `namespaces` (None: all), grouped by root cause.

        Each cluster keeps the answers of its last sweep (`FleetMemo`): a sweep triages again
        only the workloads whose reads changed. Sweeps of one cluster take turns."""
        started = self._timer()
        source = self.source_for(cluster)
        with self._memo_lock:
            lock, memo = self._memos.setdefault(source.cluster_name, (Lock(), FleetMemo()))
        with lock:
            result = sweep(
                source,
                namespaces=namespaces,
                config=self.config,
                playbook=self.playbook,
                memo=memo,
            )
        if self.metrics is not None and namespaces is None:
            self.metrics.observe_sweep(result, duration_ms=(self._timer() - started) * 1000.0)
        return result

    def source(self, cluster: str | None) -> ClusterSource:
        """What `cluster` (None: the default) is read through."""
        return self.source_for(cluster)

    def cluster_name(self, cluster: str | None) -> str:
        """The name of the cluster `cluster` selects (None: the default); LookupError when
        the bot does not serve it."""
        return self.source_for(cluster).cluster_name

    def clusters(self) -> Sequence[SourceStatus]:
        """Every served cluster and the state of its data (the default one alone when the
        source has no cache: a snapshot)."""
        if self._statuses is not None:
            return self._statuses()
        source = self.source_for(None)
        nodes, pods = len(source.objects("Node")), len(source.objects("Pod"))
        return [SourceStatus(source.cluster_name, "snapshot", nodes, pods, "")]

    def verify(self, *, cluster: str | None, node: str) -> NodeVerification:
        """The node verification template for one node (raises like `run`)."""
        return verify_node(
            self.source_for(cluster), node, config=self.config, playbook=self.playbook
        )
