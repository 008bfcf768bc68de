"""Judging nodes by class (`node_groups`, remembered while the nodes are the same objects)
must give exactly the reports that judging them one by one gives: the same verdicts, and the
same nodes in the same order in every list a report quotes from. Checked on a synthetic
cluster with many pools, broken drivers, taints and full nodes, and on fixtures."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bench.synth import cluster
from triage import MemorySource, load_snapshot, triage
from triage.cluster.memo import IdentityMemo
from triage.layers.scheduling.placement import Evaluation, Placement

NOW = datetime(2026, 1, 1, tzinfo=UTC)
FIXTURES = Path(__file__).parents[1] / "fixtures"


def _reports(source: MemorySource, pods: list[tuple[str, str]]) -> list[str]:
    return [
        triage(source, namespace=ns, name=name, now=NOW).model_dump_json(exclude={"generated_at"})
        for ns, name in pods
    ]


def _view(e: Evaluation) -> dict[str, Any]:
    """Everything a report can quote from an evaluation, by node name, in order."""
    return {
        "counts": (e.total, e.candidates),
        "usable": e.usable,
        "short": [h.name for h, _ in e.short],
        "blocked": [(f.node, f.code) for f in e.blocked],
        "joining": [f.node for f in e.joining],
        "contradictions": [h.name for h in e.contradictions],
        "excluded": [(k, [h.name for _, h in v]) for k, v in e.excluded.items()],
        "side": [(c, h.name) for c, h in e.side],
    }


def _both_ways(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every evaluation made both ways and compared; the sizes of those compared."""
    evaluate, seen = Placement.evaluate, []

    def compared(self: Placement, *args: Any, memo: Any = None) -> Any:
        one_by_one = evaluate(self, *args)
        by_class = evaluate(self, *args, memo=IdentityMemo())
        assert _view(by_class) == _view(one_by_one)
        seen.append(one_by_one.total)
        return by_class

    monkeypatch.setattr(Placement, "evaluate", compared)
    return seen


def test_every_list_of_an_evaluation_is_the_same_in_node_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    objs, pending = cluster(nodes=300, pods=9000, seed=5)
    seen = _both_ways(monkeypatch)
    _reports(MemorySource(objs), [tuple(p) for p in pending[:60]])  # type: ignore[misc]
    assert len(seen) >= 60 and max(seen) == 300


def _one_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    evaluate = Placement.evaluate

    def without_classes(self: Placement, *args: Any, memo: Any = None) -> Any:
        return evaluate(self, *args)

    monkeypatch.setattr(Placement, "evaluate", without_classes)


def test_a_synthetic_cluster_gets_the_same_reports(monkeypatch: pytest.MonkeyPatch) -> None:
    objs, pending = cluster(nodes=300, pods=9000, seed=3)
    pods = [tuple(p) for p in pending[:80]]
    by_class = _reports(MemorySource(objs), pods)  # type: ignore[arg-type]
    _one_by_one(monkeypatch)
    assert _reports(MemorySource(objs), pods) == by_class  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "name",
    ["fleet-many-causes", "mixed-driver-and-full", "mig-only-node-full", "dra-mixed-cluster"],
)
def test_fixtures_get_the_same_reports(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    path = FIXTURES / f"{name}.yaml"
    pods = [
        (p["metadata"]["namespace"], p["metadata"]["name"])
        for p in load_snapshot(path).objects("Pod")
        if (p.get("status") or {}).get("phase") == "Pending"
    ]
    assert pods
    by_class = _reports(load_snapshot(path), pods)
    _one_by_one(monkeypatch)
    assert _reports(load_snapshot(path), pods) == by_class
