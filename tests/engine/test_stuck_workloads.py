"""Which workloads a sweep triages: pods not running, and workloads that created no pods
(quota rejected them, or a queue holds them), however they ask for GPUs or for none."""

from __future__ import annotations

from typing import Any

from tests.builders import cluster, pod
from triage.fleet import stuck_workloads


def job(name: str, template: dict[str, Any], *, complete: bool = False) -> dict[str, Any]:
    conditions = [{"type": "Complete", "status": "True"}] if complete else []
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {"template": {"spec": template}},
        "status": {"conditions": conditions},
    }


def test_podless_jobs_are_listed_whatever_they_ask_and_finished_ones_are_not() -> None:
    limits = pod("x", gpus=2)["spec"]
    claims = pod("x", gpus=0)["spec"] | {
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    }
    cpu_only = pod("x", gpus=0)["spec"]
    source = cluster(
        job("extended", limits),
        job("dra", claims),
        job("done", limits, complete=True),
        job("cpu", cpu_only),
    )
    found = [(s.namespace, s.name) for s in stuck_workloads(source)]
    assert found == [("team-a", "cpu"), ("team-a", "dra"), ("team-a", "extended")]
    gpus = {s.name: s.gpus for s in stuck_workloads(source)}
    assert gpus == {"cpu": 0, "dra": 1, "extended": 2}
