"""Judging nodes by class (`node_groups`, remembered while the nodes are the same objects)
must give exactly the reports that judging them one by one gives: the same verdicts, and the
same nodes in the same order in every list a report quotes from. Checked on a synthetic
cluster with many pools, broken drivers, taints and full nodes, and on fixtures."""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bench.synth import cluster, pod
from triage import MemorySource, load_snapshot, triage
from triage.cluster.memo import IdentityMemo
from triage.cluster.usage import NodeUsage, UsageIndex
from triage.layers.scheduling import by_class
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
        "short": [(h.name, u) for h, u in zip(e.short, e.short_usage, strict=True)],
        "short_names": e.short_names(),
        "blocked": [(f.node, f.code) for f in e.blocked],
        "joining": [f.node for f in e.joining],
        "contradictions": [h.name for h in e.contradictions],
        "excluded": [(k, [h.name for _, h in v]) for k, v in e.excluded.items()],
        "side": [(c, h.name) for c, h in e.side],
    }


def _both_ways(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every evaluation made both ways (the reference evaluator, node by node, and the
    by-class fast path) and compared; the sizes of those compared."""
    fast, seen = by_class.evaluate, []

    def compared(placement: Placement, *args: Any, memo: Any = None) -> Any:
        one_by_one = placement.evaluate(*args)
        classes = fast(placement, *args, memo=IdentityMemo())
        assert _view(classes) == _view(one_by_one)
        seen.append(one_by_one.total)
        return classes

    monkeypatch.setattr(by_class, "evaluate", compared)
    return seen


def test_every_list_of_an_evaluation_is_the_same_in_node_order(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    objs, pending = cluster(nodes=300, pods=9000, seed=5)
    seen = _both_ways(monkeypatch)
    _reports(MemorySource(objs), [tuple(p) for p in pending[:60]])  # type: ignore[misc]
    assert len(seen) >= 60 and max(seen) == 300


def _one_by_one(monkeypatch: pytest.MonkeyPatch) -> None:
    def without_classes(placement: Placement, *args: Any, memo: Any = None) -> Any:
        return placement.evaluate(*args)

    monkeypatch.setattr(by_class, "evaluate", without_classes)


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


def test_a_kept_evaluation_follows_usage_changes_node_by_node(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A warm triage re-judges only the nodes whose usage changed since the last triage with
    the same limits: pods bind and finish between evaluations (through the usage index, whose
    log names the changed nodes, and as plain mappings compared node by node), some nodes are
    judged one by one (their validator disagrees), and every list must stay what a fresh
    judgement gives."""
    objs, pending = cluster(nodes=300, pods=9000, seed=11)
    calls: list[tuple[Placement, list[Any], list[Any]]] = []

    def captured(
        placement: Placement, nodes: Any, healths: Any, usage: Any, memo: Any = None
    ) -> Any:
        calls.append((placement, nodes, healths))
        return placement.evaluate(nodes, healths, usage)

    with monkeypatch.context() as patched:
        patched.setattr(by_class, "evaluate", captured)
        _reports(MemorySource(objs), [tuple(p) for p in pending[:40]])  # type: ignore[misc]
    _, nodes, healths = calls[0]
    rnd = random.Random(4)
    healths = [replace(h) for h in healths]
    for h in rnd.sample([h for h in healths if h.clean], 25):
        h.contradiction = ["the validator says the driver is not ready"]
    names = [h.name for h in healths]
    index = UsageIndex()
    running = [o for o in objs if o["kind"] == "Pod" and o["spec"].get("nodeName")]
    index.replace(running)
    memo, compared, mixed = IdentityMemo(), 0, 0
    for step in range(30):
        for i in range(rnd.choice([0, 1, 5, 60])):
            if rnd.random() < 0.4 and running:  # a pod finished
                index.change(running.pop(rnd.randrange(len(running))), None)
            else:  # a pod bound
                bound = pod(f"p{step}-{i}", "t", node=rnd.choice(names), gpu=rnd.choice([1, 8]),
                            phase="Running")  # fmt: skip
                running.append(bound)
                index.change(None, bound)
        usage: Mapping[str, NodeUsage] = index.snapshot()
        if step % 5 == 4:
            usage = dict(usage)  # another source's usage: compared node by node
        for placement, *_ in calls[: 3 + step % 4]:
            kept = _view(by_class.evaluate(placement, nodes, healths, usage, memo=memo))
            assert kept == _view(placement.evaluate(nodes, healths, usage))
            compared += 1
            mixed += bool(kept["short"]) and bool(kept["usable"])
    assert compared >= 100 and mixed


def test_the_usage_index_names_the_nodes_changed_between_snapshots() -> None:
    index = UsageIndex()
    index.replace([pod("a", "t", node="n1", gpu=1, phase="Running")])
    first = index.snapshot()
    index.change(None, pod("b", "t", node="n2", gpu=1, phase="Running"))
    index.change(pod("a", "t", node="n1", gpu=1, phase="Running"), None)
    second = index.snapshot()
    assert index.snapshot() is second  # nothing changed: the same snapshot
    assert set(first) == {"n1"} and set(second) == {"n2"}  # each as it was when taken
    assert second.changed_since(first.mark) == {"n1", "n2"}
    assert first.changed_since(second.mark) == {"n1", "n2"}
    assert second.changed_since(second.mark) == set()
    assert second.changed_since(UsageIndex().snapshot().mark) is None  # another index
    index.replace([])  # a relist: nothing before it compares
    assert index.snapshot().changed_since(second.mark) is None
    index.LOG = 2
    kept = index.snapshot()
    for i in range(6):
        index.change(None, pod(f"c{i}", "t", node=f"m{i}", gpu=1, phase="Running"))
    assert index.snapshot().changed_since(kept.mark) is None  # the log no longer reaches back
