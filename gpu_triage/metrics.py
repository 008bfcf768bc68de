"""Prometheus metrics of triages, incidents and the cluster caches, served at `/metrics`.

Every name starts with `gpu_triage_` (a cluster's Prometheus holds thousands of series; ours
must be findable and must not collide), and no `_created` series is exported (prometheus_client
adds one per counter and histogram by default: as many series again, which nothing reads).
The chart's dashboard and alert rules use these names; tests/verify/test_chart.py checks every
expression against what a bot exports.

Each `Metrics` owns its own `CollectorRegistry` (no process-global state, so tests and several
apps in one process never collide). Open incidents and the time incidents took to resolve are
read from the store at scrape time; a database that is down yields none of those samples and
`gpu_triage_incident_store_up 0` instead of a failed scrape. The watch-backed caches of a live
bot are read at scrape time too: objects per kind, each watch's state and how long it has
been down, relists and API requests.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable
from datetime import timedelta
from typing import TYPE_CHECKING

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
    generate_latest,
    start_http_server,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST, make_wsgi_app
from prometheus_client.registry import Collector

from incidents.errors import IncidentStoreError
from triage.fleet import Sweep
from triage.model import LAYER_ORDER, Answer, Layer, TriageReport

if TYPE_CHECKING:
    from collections.abc import Mapping
    from wsgiref.types import WSGIApplication

    from incidents.store import IncidentStore
    from kube.cache import CachedSource

log = logging.getLogger(__name__)

PREFIX = "gpu_triage_"

NO_LAYER = "none"  # label value of triages that found nothing blocking the workload
UNKNOWN_LAYER = "unknown"  # label value of triages that could not judge a layer (a read failed)
DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class SweepCollector(Collector):
    """The last full sweep of each cluster: stuck GPU workloads and GPUs waiting, per layer and
    per group (labelled by cluster, cause key, layer and code; never by tenant)."""

    def __init__(self) -> None:
        self.last: dict[str, tuple[Sweep, float]] = {}  # cluster -> (sweep, duration ms)
        self.held: dict[str, dict[str, int]] = {}  # cluster -> why -> alerts held back

    def collect(self) -> Iterable[Metric]:
        per_layer = GaugeMetricFamily(
            PREFIX + "stuck_gpu_workloads",
            "Stuck GPU workloads in the last sweep, by cluster and layer",
            labels=["cluster", "layer"],
        )
        gpus_layer = GaugeMetricFamily(
            PREFIX + "gpus_waiting",
            "GPUs stuck workloads wait for in the last sweep, by cluster and layer",
            labels=["cluster", "layer"],
        )
        per_group = GaugeMetricFamily(
            PREFIX + "stuck_group_workloads", "Stuck GPU workloads per root-cause group",
            labels=["cluster", "group", "layer", "code"],
        )  # fmt: skip
        gpus_group = GaugeMetricFamily(
            PREFIX + "stuck_group_gpus",
            "GPUs waiting per root-cause group",
            labels=["cluster", "group", "layer", "code"],
        )
        seconds = GaugeMetricFamily(
            PREFIX + "sweep_duration_seconds", "Time of the last full sweep", labels=["cluster"]
        )
        answers = GaugeMetricFamily(
            PREFIX + "sweep_workloads",
            "Stuck workloads in the last full sweep, by whether they were triaged again or "
            "kept their answer (nothing they read had changed)",
            labels=["cluster", "answer"],
        )
        held = GaugeMetricFamily(
            PREFIX + "alerts_held",
            "Root-cause groups whose alert the last alert cycle held back, by why: "
            "quiet-hours, rate-limit (max_posts_per_hour), incomplete-sweep (nothing changes "
            "on a partial picture)",
            labels=["cluster", "reason"],
        )
        for cluster, reasons in sorted(self.held.items()):
            for reason in HELD_REASONS:
                held.add_metric([cluster, reason], reasons.get(reason, 0))
        yield held
        for cluster, (sweep, duration_ms) in sorted(self.last.items()):
            for layer in LAYER_ORDER:
                mine = [g for g in sweep.groups if g.layer == layer]
                per_layer.add_metric([cluster, layer.value], sum(g.workloads for g in mine))
                gpus_layer.add_metric([cluster, layer.value], sum(g.gpus for g in mine))
            for g in sweep.groups:
                ids = [cluster, g.key, g.layer.value, g.code]
                per_group.add_metric(ids, g.workloads)
                gpus_group.add_metric(ids, g.gpus)
            seconds.add_metric([cluster], duration_ms / 1000.0)
            answers.add_metric([cluster, "triaged"], sweep.triaged)
            answers.add_metric([cluster, "kept"], sweep.reused)
        yield from (per_layer, gpus_layer, per_group, gpus_group, seconds, answers)


class Metrics:
    """gpu_triage_triages_total{layer}, gpu_triage_triage_duration_seconds, the sweeps' and
    alerts' families, the incident store's (`OpenIncidentsCollector`) and the caches'
    (`CacheCollector`). README "Metrics" lists them all."""

    def __init__(
        self,
        *,
        store: IncidentStore | None = None,
        caches: Callable[[], Mapping[str, CachedSource]] | None = None,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        disable_created_metrics()  # type: ignore[no-untyped-call]  # process-wide; idempotent
        self.triages = Counter(
            PREFIX + "triages",
            "Triages answered, by failing layer ('none' when nothing blocks the workload)",
            ["layer"],
            registry=self.registry,
        )
        for label in [*(layer.value for layer in LAYER_ORDER), NO_LAYER, UNKNOWN_LAYER]:
            self.triages.labels(layer=label)  # every series exists from the start, at 0
        self.alerts = Counter(
            PREFIX + "alerts",
            "Fleet-view alert messages sent, by action (posted, updated, resolved)",
            ["action"],
            registry=self.registry,
        )
        for action in ("posted", "updated", "resolved"):
            self.alerts.labels(action=action)
        self._sweep = SweepCollector()
        self.registry.register(self._sweep)
        self.duration = Histogram(
            PREFIX + "triage_duration_seconds",
            "Time to triage one workload, cluster reads included",
            buckets=DURATION_BUCKETS,
            registry=self.registry,
        )
        if store is not None:
            self.registry.register(OpenIncidentsCollector(store))
        if caches is not None:
            self.registry.register(CacheCollector(caches))

    def observe(self, report: TriageReport, *, duration_ms: float) -> None:
        layer = report.failing_layer.value if report.failing_layer is not None else NO_LAYER
        if report.answer == Answer.UNKNOWN:
            layer = UNKNOWN_LAYER
        self.triages.labels(layer=layer).inc()
        self.duration.observe(duration_ms / 1000.0)

    def observe_sweep(self, sweep: Sweep, *, duration_ms: float) -> None:
        """Keep each cluster's last full sweep for the stuck-workload gauges."""
        self._sweep.last[sweep.cluster] = (sweep, duration_ms)

    def observe_held(self, cluster: str, reasons: list[str]) -> None:
        """What the last alert cycle of `cluster` held back (the alerter's reasons)."""
        counts: dict[str, int] = {}
        for why in reasons:
            kind = held_reason(why)
            counts[kind] = counts.get(kind, 0) + 1
        self._sweep.held[cluster] = counts

    def serve(self, *, host: str, port: int) -> Callable[[], None]:
        """Serve `/metrics` on a port of its own (GPU_TRIAGE_METRICS_PORT: scraped inside the
        cluster, never published with the Slack endpoint); returns how to stop it."""
        httpd, thread = start_http_server(port, addr=host, registry=self.registry)

        def stop() -> None:
            httpd.shutdown()
            httpd.server_close()
            thread.join(timeout=5)

        return stop

    def count_alerts(self, *, posted: int, updated: int, resolved: int) -> None:
        for action, n in (("posted", posted), ("updated", updated), ("resolved", resolved)):
            if n:
                self.alerts.labels(action=action).inc(n)

    def render(self) -> tuple[bytes, str]:
        """The exposition body and its Content-Type, for any HTTP server."""
        return generate_latest(self.registry), CONTENT_TYPE_LATEST

    def metrics_app(self) -> WSGIApplication:
        """A WSGI app serving this registry (mount it at `/metrics`)."""
        app: WSGIApplication = make_wsgi_app(self.registry)
        return app


HELD_REASONS = ("quiet-hours", "rate-limit", "incomplete-sweep", "other")


def held_reason(why: str) -> str:
    """The kind of a reason the alerter gives for holding an alert back (bot.alerts)."""
    if "quiet hours" in why:
        return "quiet-hours"
    if "posts in the last hour" in why:
        return "rate-limit"
    if why.startswith("sweep incomplete"):
        return "incomplete-sweep"
    return "other"


class OpenIncidentsCollector(Collector):
    """Reads unresolved incidents per layer from the store on every scrape."""

    def __init__(self, store: IncidentStore) -> None:
        self._store = store

    def describe(self) -> Iterable[Metric]:
        # Declared without touching the database, so registering never needs it up.
        yield GaugeMetricFamily(PREFIX + "open_incidents", _OPEN_HELP, labels=["layer"])
        yield GaugeMetricFamily(PREFIX + "incident_store_up", _UP_HELP)
        yield GaugeMetricFamily(RESOLVE, _RESOLVE_HELP, labels=["layer", "quantile"])
        yield GaugeMetricFamily(RESOLVED, _RESOLVED_HELP, labels=["layer"])

    def collect(self) -> Iterable[Metric]:
        up = GaugeMetricFamily(PREFIX + "incident_store_up", _UP_HELP)
        try:
            counts: dict[Layer, int] | None = self._store.open_counts()
            times: list[tuple[str, float]] = self._store.resolution_times(within=RESOLVE_WINDOW)
        except IncidentStoreError as e:
            log.warning("metrics: %s", e)  # said once per fact (gpu_triage.logs)
            counts, times = None, []
        if counts is not None:
            family = GaugeMetricFamily(PREFIX + "open_incidents", _OPEN_HELP, labels=["layer"])
            for layer in LAYER_ORDER:
                family.add_metric([layer.value], counts.get(layer, 0))
            yield family
            yield from _resolution(times)
        up.add_metric([], 1 if counts is not None else 0)
        yield up


RESOLVE = PREFIX + "incident_time_to_resolve_seconds"
RESOLVED = PREFIX + "incidents_resolved_last_day"
RESOLVE_WINDOW = timedelta(days=1)
_RESOLVE_HELP = (
    "Time from opening to resolution of the incidents resolved in the last 24 hours, by "
    "failing layer (quantile 0.5 and 0.9)"
)
_RESOLVED_HELP = "Incidents resolved in the last 24 hours, by failing layer"


def _resolution(times: list[tuple[str, float]]) -> Iterable[Metric]:
    quantiles = GaugeMetricFamily(RESOLVE, _RESOLVE_HELP, labels=["layer", "quantile"])
    resolved = GaugeMetricFamily(RESOLVED, _RESOLVED_HELP, labels=["layer"])
    for layer in LAYER_ORDER:
        mine = sorted(s for name, s in times if name == layer.value)
        resolved.add_metric([layer.value], len(mine))
        if mine:
            for q in (0.5, 0.9):
                quantiles.add_metric([layer.value, str(q)], _quantile(mine, q))
    yield from (quantiles, resolved)


def _quantile(ordered: list[float], q: float) -> float:
    """The q-quantile of sorted values, by the nearest rank."""
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


_OPEN_HELP = "Incidents not yet resolved (open or acknowledged), by failing layer"
_UP_HELP = "1 when the incident database answered the last scrape, else 0"


class CacheCollector(Collector):
    """The watch-backed caches (one per cluster), read on every scrape."""

    def __init__(self, caches: Callable[[], Mapping[str, CachedSource]]) -> None:
        self._caches = caches

    def collect(self) -> Iterable[Metric]:
        from kube.cache import STATES

        labels = ["cluster", "kind"]
        objects = GaugeMetricFamily(
            PREFIX + "cluster_cache_objects", "Objects held in the cache", labels=labels
        )
        state = GaugeMetricFamily(
            PREFIX + "cluster_cache_watch_state",
            "1 for the watch's current state: starting, synced, failing, forbidden (read per "
            "request instead) or absent (the API is not installed)",
            labels=[*labels, "state"],
        )
        down = GaugeMetricFamily(
            PREFIX + "cluster_cache_watch_down_seconds",
            "Seconds since the watch was lost (0 while it runs); triages serve the last state",
            labels=labels,
        )
        relists = CounterMetricFamily(
            PREFIX + "cluster_cache_relists", "Full relists after 410 Gone", labels=labels
        )
        requests = CounterMetricFamily(
            PREFIX + "cluster_api_requests", "Requests sent to the API server", labels=["cluster"]
        )
        watches = CounterMetricFamily(
            PREFIX + "cluster_api_watches",
            "Watch streams opened (syncs by the watch-list protocol included)",
            labels=["cluster"],
        )
        for cluster, cache in sorted(self._caches().items()):
            for kind in cache.health():
                ids = [cluster, kind.kind]
                objects.add_metric(ids, kind.objects)
                for name in STATES:
                    state.add_metric([*ids, name], 1 if kind.state == name else 0)
                down.add_metric(ids, kind.down_seconds)
                relists.add_metric(ids, kind.relists)
            requests.add_metric([cluster], cache.client.requests)
            watches.add_metric([cluster], cache.client.watches)
        yield from (objects, state, down, relists, requests, watches)
