"""Helpers shared by the incident store tests: report values and a controllable clock."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from triage.model import Finding, Layer, OwnerRoute, PodRef, Status, TriageReport, WorkloadRef


class FakeClock:
    def __init__(self) -> None:
        self.now = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **delta: float) -> None:
        self.now += timedelta(**delta)


MakeReport = Callable[..., TriageReport]


def make_report(
    layer: Layer | None = Layer.SCHEDULING,
    *,
    codes: tuple[str, ...] = ("insufficient-gpu",),
    namespace: str = "ml",
    name: str = "train-0",
    kind: str = "Pod",
    pod: str | None = None,
    cluster: str = "default",
    headline: str | None = None,
    team: str = "ml-platform",
    workload: tuple[str, str] | None = None,
) -> TriageReport:
    findings = [
        Finding(
            layer=each,
            status=Status.FAIL if each == layer else Status.OK,
            summary=f"{each.value} checked",
            evidence=[f"evidence for {each.value}"],
            codes=list(codes) if each == layer else [],
        )
        for each in Layer
    ]
    return TriageReport(
        pod=PodRef(
            namespace=namespace,
            name=name,
            kind=kind,
            pod=pod,
            workload=None if workload is None else WorkloadRef(kind=workload[0], name=workload[1]),
        ),
        cluster=cluster,
        failing_layer=layer,
        headline=headline or (f"blocked at {layer.value}" if layer else "running"),
        findings=findings,
        owner=OwnerRoute(team=team, channel="#" + team, usergroup="S0123") if layer else None,
    )
