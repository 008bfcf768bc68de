"""TriageService (engine → store → metrics) and the Prometheus exposition."""

from __future__ import annotations

import io
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpu_triage.metrics import Metrics
from gpu_triage.service import TriageService
from incidents import IncidentStatus, IncidentStore
from tests.incidents.incident_helpers import make_report
from triage import ClusterSource, EngineConfig, MemorySource, NotFoundError, Playbook, TriageReport
from triage.model import Layer


class FakeEngine:
    """Stands in for triage.triage: returns queued reports and records what it was asked."""

    def __init__(self, *reports: TriageReport) -> None:
        self.reports = list(reports)
        self.calls: list[dict[str, Any]] = []

    def __call__(
        self,
        source: ClusterSource,
        *,
        namespace: str,
        name: str,
        config: EngineConfig | None = None,
        playbook: Playbook | None = None,
        nodes: bool = False,
    ) -> TriageReport:
        self.calls.append(
            {"source": source, "namespace": namespace, "name": name, "config": config}
        )
        if not self.reports:
            raise NotFoundError(f"pod {namespace}/{name} not found")
        return self.reports.pop(0)


def _samples(metrics: Metrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    body, content_type = metrics.render()
    assert content_type.startswith("text/plain")
    out = {}
    for family in text_string_to_metric_families(body.decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def _service(engine: FakeEngine, store: IncidentStore | None, metrics: Metrics) -> TriageService:
    sources: dict[str | None, ClusterSource] = {None: MemorySource([], cluster_name="default")}
    ticks = iter([10.0, 10.25, 20.0, 20.5, 30.0, 30.125])
    return TriageService(
        source_for=lambda cluster: sources[cluster],
        config=EngineConfig(max_evidence=3),
        store=store,
        metrics=metrics,
        triage_fn=engine,
        timer=lambda: next(ticks),
    )


def test_run_records_and_counts(store: IncidentStore) -> None:
    engine = FakeEngine(make_report(Layer.DRIVER), make_report(Layer.DRIVER), make_report(None))
    metrics = Metrics(store=store)
    service = _service(engine, store, metrics)

    first = service.run(
        cluster=None, namespace="ml", name="train-0", requested_by="U1", channel="C1"
    )
    assert first.store_error is None and first.created
    assert first.duration_ms == pytest.approx(250.0)
    assert first.incident is not None and first.incident.channel == "C1"
    assert engine.calls[0]["namespace"] == "ml" and engine.calls[0]["name"] == "train-0"
    assert engine.calls[0]["config"] == EngineConfig(max_evidence=3)

    second = service.run(cluster=None, namespace="ml", name="train-0", requested_by="U2")
    assert not second.created and second.incident is not None
    assert second.incident.id == first.incident.id
    assert [r.duration_ms for r in store.runs(first.incident.id)] == [250.0, 500.0]

    s = _samples(metrics)
    assert s[("gpu_triage_triages_total", (("layer", "driver"),))] == 2
    assert s[("gpu_triage_triages_total", (("layer", "quota"),))] == 0
    assert s[("gpu_triage_open_incidents", (("layer", "driver"),))] == 1
    assert s[("gpu_triage_incident_store_up", ())] == 1
    assert s[("gpu_triage_triage_duration_seconds_count", ())] == 2
    assert s[("gpu_triage_triage_duration_seconds_sum", ())] == pytest.approx(0.75)

    third = service.run(cluster=None, namespace="ml", name="train-0", requested_by="U3")
    assert third.auto_resolved == [first.incident.id]
    assert third.incident is not None and third.incident.status is IncidentStatus.RESOLVED
    s = _samples(metrics)
    assert s[("gpu_triage_triages_total", (("layer", "none"),))] == 1
    assert s[("gpu_triage_open_incidents", (("layer", "driver"),))] == 0
    # resolved: how long it took, per layer, for the dashboard (the last day's)
    assert s[("gpu_triage_incidents_resolved_last_day", (("layer", "driver"),))] == 1
    took = s[
        ("gpu_triage_incident_time_to_resolve_seconds", (("layer", "driver"), ("quantile", "0.5")))
    ]
    assert 0 <= took < 60
    assert (
        "gpu_triage_incident_time_to_resolve_seconds",
        (("layer", "quota"), ("quantile", "0.5")),
    ) not in s
    assert not [name for name, _ in s if name.endswith("_created")]


def test_store_down_still_answers() -> None:
    with IncidentStore.from_url("postgresql+psycopg://u:pw@127.0.0.1:9/x") as down:
        metrics = Metrics(store=down)
        report = make_report(Layer.QUOTA)
        outcome = _service(FakeEngine(report), down, metrics).run(
            cluster=None, namespace="ml", name="train-0", requested_by="U1"
        )
        assert outcome.report == report
        assert (outcome.incident, outcome.created) == (None, False)
        assert outcome.store_error is not None
        assert outcome.store_error.startswith("incident database postgresql+psycopg://u:***@")
        assert "\n" not in outcome.store_error
        s = _samples(metrics)  # the scrape itself must not fail
    assert s[("gpu_triage_triages_total", (("layer", "quota"),))] == 1
    assert s[("gpu_triage_incident_store_up", ())] == 0
    assert not any(name == "gpu_triage_open_incidents" for name, _ in s)


def test_engine_errors_propagate_and_count_nothing(store: IncidentStore) -> None:
    metrics = Metrics(store=store)
    service = _service(FakeEngine(), store, metrics)
    with pytest.raises(NotFoundError):
        service.run(cluster=None, namespace="ml", name="ghost", requested_by="U1")
    assert store.list() == []
    assert _samples(metrics)[("gpu_triage_triage_duration_seconds_count", ())] == 0


def test_without_store() -> None:
    metrics = Metrics()
    outcome = _service(FakeEngine(make_report()), None, metrics).run(
        cluster=None, namespace="ml", name="train-0", requested_by=None
    )
    assert (outcome.incident, outcome.store_error) == (None, None)
    assert not any(name == "gpu_triage_incident_store_up" for name, _ in _samples(metrics))


def test_registries_are_independent_and_served_over_wsgi() -> None:
    a, b = Metrics(), Metrics()
    a.observe(make_report(Layer.SCHEDULING), duration_ms=10)
    assert _samples(a)[("gpu_triage_triages_total", (("layer", "scheduling"),))] == 1
    assert _samples(b)[("gpu_triage_triages_total", (("layer", "scheduling"),))] == 0

    status: list[str] = []
    environ = {
        "REQUEST_METHOD": "GET",
        "PATH_INFO": "/metrics",
        "QUERY_STRING": "",
        "wsgi.input": io.BytesIO(b""),
        "SERVER_NAME": "x",
        "SERVER_PORT": "80",
        "wsgi.url_scheme": "http",
    }
    body = b"".join(a.metrics_app()(environ, lambda s, h, *_: status.append(s)))  # type: ignore[arg-type]
    assert status == ["200 OK"]
    assert b'gpu_triage_triages_total{layer="scheduling"} 1.0' in body
