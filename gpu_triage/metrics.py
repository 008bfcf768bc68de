"""Prometheus metrics of triages, incidents and the cluster caches, served at `/metrics`.

Each `Metrics` owns its own `CollectorRegistry` (no process-global state, so tests and several
apps in one process never collide). `open_incidents` is read from the store at scrape time; a
database that is down yields no `open_incidents` samples and `incident_store_up 0` instead of a
failed scrape. The watch-backed caches of a live bot are read at scrape time too: objects per
kind, each watch's state and how long it has been down, relists and API requests.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST, make_wsgi_app
from prometheus_client.registry import Collector

from incidents.errors import IncidentStoreError
from triage.fleet import Sweep
from triage.model import LAYER_ORDER, Answer, Layer, TriageReport

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from wsgiref.types import WSGIApplication

    from incidents.store import IncidentStore
    from kube.cache import CachedSource

log = logging.getLogger(__name__)

NO_LAYER = "none"  # label value of triages that found nothing blocking the workload
UNKNOWN_LAYER = "unknown"  # label value of triages that could not judge a layer (a read failed)
DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class SweepCollector(Collector):
    """The last full sweep of each cluster: stuck GPU workloads and GPUs waiting, per layer and
    per group (labelled by cluster, cause key, layer and code; never by tenant)."""

    def __init__(self) -> None:
        self.last: dict[str, tuple[Sweep, float]] = {}  # cluster -> (sweep, duration ms)

    def collect(self) -> Iterable[Metric]:
        per_layer = GaugeMetricFamily(
            "stuck_gpu_workloads",
            "Stuck GPU workloads in the last sweep, by cluster and layer",
            labels=["cluster", "layer"],
        )
        gpus_layer = GaugeMetricFamily(
            "gpus_waiting",
            "GPUs stuck workloads wait for in the last sweep, by cluster and layer",
            labels=["cluster", "layer"],
        )
        per_group = GaugeMetricFamily(
            "stuck_group_workloads", "Stuck GPU workloads per root-cause group",
            labels=["cluster", "group", "layer", "code"],
        )  # fmt: skip
        gpus_group = GaugeMetricFamily(
            "stuck_group_gpus",
            "GPUs waiting per root-cause group",
            labels=["cluster", "group", "layer", "code"],
        )
        seconds = GaugeMetricFamily(
            "sweep_duration_seconds", "Time of the last full sweep", labels=["cluster"]
        )
        answers = GaugeMetricFamily(
            "sweep_workloads",
            "Stuck workloads in the last full sweep, by whether they were triaged again or "
            "kept their answer (nothing they read had changed)",
            labels=["cluster", "answer"],
        )
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
    """triages_total{layer}, triage_duration_seconds, open_incidents{layer}, incident_store_up,
    and the cluster_cache_* / cluster_api_requests_total / cluster_api_watches_total families of `CacheCollector`."""

    def __init__(
        self,
        *,
        store: IncidentStore | None = None,
        caches: Callable[[], Mapping[str, CachedSource]] | None = None,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.triages = Counter(
            "triages",
            "Triages answered, by failing layer ('none' when nothing blocks the workload)",
            ["layer"],
            registry=self.registry,
        )
        for label in [*(layer.value for layer in LAYER_ORDER), NO_LAYER, UNKNOWN_LAYER]:
            self.triages.labels(layer=label)  # every series exists from the start, at 0
        self.alerts = Counter(
            "alerts",
            "Fleet-view alert messages sent, by action (posted, updated, resolved)",
            ["action"],
            registry=self.registry,
        )
        for action in ("posted", "updated", "resolved"):
            self.alerts.labels(action=action)
        self._sweep = SweepCollector()
        self.registry.register(self._sweep)
        self.duration = Histogram(
            "triage_duration_seconds",
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


class OpenIncidentsCollector(Collector):
    """Reads unresolved incidents per layer from the store on every scrape."""

    def __init__(self, store: IncidentStore) -> None:
        self._store = store

    def describe(self) -> Iterable[Metric]:
        # Declared without touching the database, so registering never needs it up.
        yield GaugeMetricFamily("open_incidents", _OPEN_HELP, labels=["layer"])
        yield GaugeMetricFamily("incident_store_up", _UP_HELP)

    def collect(self) -> Iterable[Metric]:
        up = GaugeMetricFamily("incident_store_up", _UP_HELP)
        try:
            counts: dict[Layer, int] | None = self._store.open_counts()
        except IncidentStoreError as e:
            log.warning("metrics: %s", e)
            counts = None
        if counts is not None:
            family = GaugeMetricFamily("open_incidents", _OPEN_HELP, labels=["layer"])
            for layer in LAYER_ORDER:
                family.add_metric([layer.value], counts.get(layer, 0))
            yield family
        up.add_metric([], 1 if counts is not None else 0)
        yield up


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
            "cluster_cache_objects", "Objects held in the cache", labels=labels
        )
        state = GaugeMetricFamily(
            "cluster_cache_watch_state",
            "1 for the watch's current state: starting, synced, failing, forbidden (read per "
            "request instead) or absent (the API is not installed)",
            labels=[*labels, "state"],
        )
        down = GaugeMetricFamily(
            "cluster_cache_watch_down_seconds",
            "Seconds since the watch was lost (0 while it runs); triages serve the last state",
            labels=labels,
        )
        relists = CounterMetricFamily(
            "cluster_cache_relists", "Full relists after 410 Gone", labels=labels
        )
        requests = CounterMetricFamily(
            "cluster_api_requests", "Requests sent to the API server", labels=["cluster"]
        )
        watches = CounterMetricFamily(
            "cluster_api_watches",
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
