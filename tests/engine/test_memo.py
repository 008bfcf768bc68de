"""Node health is remembered between triages of a long-lived source (the bot's cache) and
recomputed exactly where the cluster changed."""

from __future__ import annotations

from typing import Any

import pytest

import triage.layers.health as health
from tests.builders import cluster, node, operator_pods, pod, without_gpus
from triage import Layer, MemorySource, triage


@pytest.fixture
def assessed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Names of the nodes the engine assesses from now on (memo misses), in order."""
    calls: list[str] = []
    real = health.assess_node

    def counting(node_obj: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        calls.append(node_obj["metadata"]["name"])
        return real(node_obj, *args, **kwargs)

    monkeypatch.setattr(health, "assess_node", counting)
    return calls


def test_health_is_reused_until_the_node_or_its_operator_pods_change(
    assessed: list[str],
) -> None:
    nodes = [node("a1"), node("a2"), node("a3")]
    ops = {n["metadata"]["name"]: operator_pods(n["metadata"]["name"]) for n in nodes}
    full = [
        pod(f"busy-{i}", ns="team-b", gpus=8, node_name=f"a{i}", phase="Running") for i in (1, 2, 3)
    ]
    first = cluster(*nodes, *ops.values(), *full, pod("train"))

    assert triage(first, namespace="team-a", name="train").failing_layer == Layer.SCHEDULING
    assert sorted(assessed) == ["a1", "a2", "a3"]
    assessed.clear()
    assert triage(first, namespace="team-a", name="train").failing_layer == Layer.SCHEDULING
    assert assessed == []  # nothing changed: nothing recomputed

    # The driver on a2 starts crash-looping and a2 loses its GPUs; the same memo carries over.
    crashed = {**ops, "a2": operator_pods("a2", driver="crash")}
    a2 = node("a2")
    for key in ("capacity", "allocatable"):
        a2["status"][key].pop("nvidia.com/gpu")
    second = MemorySource(
        [
            nodes[0],
            a2,
            nodes[2],
            *[p for group in crashed.values() for p in group],
            *full,
            pod("train"),
            *first.objects("Namespace"),
        ]
    )
    second.memo = first.memo
    report = triage(second, namespace="team-a", name="train")
    assert assessed == ["a2"]  # a1 and a3 kept their verdicts
    assert report.failing_layer == Layer.DRIVER  # a1, a3 full; a2 cannot see its GPUs


def test_a_node_replaced_in_place_is_reassessed_alone(assessed: list[str]) -> None:
    """The watch replaced one node object (same position in the list); nothing else changed."""
    nodes = [node("a1"), node("a2"), node("a3")]
    others = [*operator_pods("a1"), *operator_pods("a2"), *operator_pods("a3")]
    full = [
        pod(f"busy-{i}", ns="team-b", gpus=8, node_name=f"a{i}", phase="Running") for i in (1, 2)
    ]
    first = cluster(*nodes, *others, *full, pod("train"))
    report = triage(first, namespace="team-a", name="train")
    assert report.failing_layer is None  # a3 is free
    assessed.clear()

    second = MemorySource(
        [
            *(nodes[0], nodes[1], node("a3", cordoned=True)),
            *others,
            *full,
            pod("train"),
            *first.objects("Namespace"),
        ]
    )
    second.memo = first.memo
    report = triage(second, namespace="team-a", name="train")
    assert assessed == ["a3"]
    assert report.failing_layer == Layer.SCHEDULING
    assert "scheduling.cordoned" in report.finding(Layer.SCHEDULING).codes


def test_a_new_minute_reassesses_only_nodes_whose_verdict_depends_on_the_clock(
    assessed: list[str],
) -> None:
    """a2 became Ready at 12:00 and advertises no GPUs yet: joining within the 15-minute grace
    period, and the cause once it is over. a1 is full; its verdict does not age."""
    from datetime import UTC, datetime

    joining = without_gpus(node("a2"))
    joining["status"]["conditions"][0]["lastTransitionTime"] = "2026-12-02T12:00:00Z"
    objs = [node("a1"), joining, *operator_pods("a1"), *operator_pods("a2")]
    objs.append(pod("busy", ns="team-b", gpus=8, node_name="a1", phase="Running"))
    source = cluster(*objs, pod("train"))

    early = triage(
        source, namespace="team-a", name="train", now=datetime(2026, 12, 2, 12, 5, tzinfo=UTC)
    )
    assert early.failing_layer is None and early.headline.startswith("not blocked, waiting")
    assessed.clear()

    late = triage(
        source, namespace="team-a", name="train", now=datetime(2026, 12, 2, 12, 40, tzinfo=UTC)
    )
    assert assessed == ["a2"]
    assert late.failing_layer == Layer.DEVICE_PLUGIN
    evidence = " ".join(late.finding(Layer.DEVICE_PLUGIN).evidence)
    assert "40 minutes after the node became Ready" in evidence


def test_an_index_kept_through_changes_equals_one_built_afresh() -> None:
    """Owner and troubled-pod indexes kept current pod change by pod change (pods created,
    replaced, rescheduled to another owner, deleted; owners with one pod and with many)
    file every pod exactly where an index built from the final pods does, in order."""
    import random

    from triage.cluster.indexes import INDEXERS, POD_OWNER, POD_TROUBLED, Index

    rnd = random.Random(9)

    def made(name: str) -> dict[str, Any]:
        owners = rnd.choice([[], ["a"], ["b"], [f"solo-{name}"], ["a", "b"]])
        phase = rnd.choice(["Pending", "Running", "Succeeded"])
        made = pod(name, node_name=None if phase == "Pending" else "n1", phase=phase)
        made["metadata"]["ownerReferences"] = [{"kind": "Job", "name": o} for o in owners]
        return made

    for index_name in (POD_OWNER, POD_TROUBLED):
        fn = INDEXERS[("Pod", index_name)]
        held = {f"p{i}": made(f"p{i}") for i in range(30)}
        kept = Index(fn, held.values())
        for _ in range(400):
            name = f"p{rnd.randrange(40)}"
            old = held.pop(name, None)
            new = None if rnd.random() < 0.3 else made(name)
            if new is not None:
                held[name] = new
            kept.update(old, new)
        fresh = Index(fn, held.values())
        keys = {k for p in held.values() for k in fn(p)} | {("team-a", "Job", "a"), "*", "team-a"}
        assert any(len(kept.get(k)) > 1 for k in keys)
        for k in keys:
            assert sorted(p["metadata"]["name"] for p in kept.get(k)) == sorted(
                p["metadata"]["name"] for p in fresh.get(k)
            )
            assert all(any(p is q for q in held.values()) for p in kept.get(k))
        assert len(kept) == len(fresh)
        for p in list(held.values()):
            kept.update(held.pop(p["metadata"]["name"]), None)
        assert len(kept) == 0 and kept._by_head == {}  # nothing left behind for gone owners


def test_recent_values_keep_the_last_used_and_drop_the_oldest() -> None:
    from triage.cluster.memo import Recent

    kept: Recent[str, int] = Recent(2)
    kept.put("a", 1)
    kept.put("b", 2)
    assert kept.get("a") == 1  # used: now the newest
    kept.put("c", 3)
    assert (kept.get("a"), kept.get("b"), kept.get("c"), len(kept)) == (1, None, 3, 2)
