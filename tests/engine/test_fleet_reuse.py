"""Sweeps that keep answers between them: after any change in the cluster, a sweep with a
memo says exactly what a fresh sweep says, and it triages again only what the change touches.

The randomized test applies changes of the kinds a cluster sees (pods bound, finishing or
created, a driver pod crashing, a node tainted, cordoned, relabelled or losing GPUs, a quota
raised, events arriving, a heartbeat) to fixture clusters, and compares the two sweeps after
each one.
"""

from __future__ import annotations

import copy
import random
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from triage import load_snapshot
from triage.cluster.kinds import ALL_KINDS
from triage.cluster.memory import MemorySource
from triage.cluster.objects import Obj, meta, name_of, ns_of
from triage.fleet import FleetMemo, Sweep, stuck_workloads, sweep
from triage.playbooks import load_playbook

FIXTURES = Path(__file__).parents[1] / "fixtures"
DEMO = Path(__file__).parents[2] / "gpu_triage" / "demo" / "cluster.yaml"
PLAYBOOK = load_playbook()


def _source(path: Path) -> MemorySource:
    src = load_snapshot(path)
    assert isinstance(src, MemorySource)
    return src


def _now(src: MemorySource) -> datetime:
    return src.as_of or datetime(2026, 1, 1, tzinfo=UTC)


def _answer(result: Sweep) -> dict[str, Any]:
    return result.model_dump(
        exclude={"generated_at": True, "triaged": True, "reused": True,
                 "groups": {"__all__": {"triaged"}}}
    )  # fmt: skip


def _fresh(src: MemorySource, now: datetime) -> Sweep:
    return sweep(src, playbook=PLAYBOOK, now=now)


def _kept(src: MemorySource, memo: FleetMemo, now: datetime) -> Sweep:
    return sweep(src, playbook=PLAYBOOK, now=now, memo=memo)


# --- changes a cluster sees ------------------------------------------------------------------


def _edit(src: MemorySource, obj: Obj) -> Obj:
    new = copy.deepcopy(obj)
    meta(new)["resourceVersion"] = str(random.random())
    return new


def _pods(src: MemorySource, *, pending: bool | None = None) -> list[Obj]:
    pods = src.objects("Pod")
    if pending is None:
        return pods
    return [p for p in pods if ((p.get("status") or {}).get("phase") == "Pending") == pending]


def bind_pending(src: MemorySource, rnd: random.Random) -> str:
    pods, nodes = _pods(src, pending=True), src.objects("Node")
    if not pods or not nodes:
        return "nothing pending"
    pod = _edit(src, rnd.choice(pods))
    pod["spec"]["nodeName"] = name_of(rnd.choice(nodes))
    pod["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
    src.put(pod)
    return f"bound {ns_of(pod)}/{name_of(pod)}"


def finish_running(src: MemorySource, rnd: random.Random) -> str:
    pods = [p for p in _pods(src, pending=False) if (p.get("spec") or {}).get("nodeName")]
    if not pods:
        return "nothing running"
    pod = rnd.choice(pods)
    src.remove("Pod", name_of(pod), namespace=ns_of(pod))
    return f"removed {ns_of(pod)}/{name_of(pod)}"


def new_pending(src: MemorySource, rnd: random.Random) -> str:
    pods = _pods(src, pending=True)
    if not pods:
        return "nothing to copy"
    pod = _edit(src, rnd.choice(pods))
    meta(pod)["name"] = f"{name_of(pod)}-copy{rnd.randrange(1000)}"
    meta(pod)["uid"] = meta(pod)["name"]
    src.put(pod)
    return f"created {ns_of(pod)}/{name_of(pod)}"


def crash_driver(src: MemorySource, rnd: random.Random) -> str:
    drivers = [p for p in _pods(src) if "driver" in name_of(p)]
    if not drivers:
        return "no driver pods"
    pod = _edit(src, rnd.choice(drivers))
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    crashing = any(((s.get("state") or {}).get("waiting") or {}) for s in statuses)
    for s in statuses:
        s["ready"] = crashing
        s["state"] = (
            {"running": {"startedAt": "2026-01-01T00:00:00Z"}}
            if crashing
            else {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off"}}
        )
        s["restartCount"] = int(s.get("restartCount") or 0) + 1
    pod.setdefault("status", {})["phase"] = "Running"
    src.put(pod)
    return f"driver {name_of(pod)} {'recovered' if crashing else 'crashing'}"


def change_node(src: MemorySource, rnd: random.Random) -> str:
    nodes = src.objects("Node")
    if not nodes:
        return "no nodes"
    node = _edit(src, rnd.choice(nodes))
    what = rnd.choice(("taint", "cordon", "label", "gpus", "ready", "heartbeat"))
    spec, status = node.setdefault("spec", {}), node.setdefault("status", {})
    if what == "taint":
        taints = spec.setdefault("taints", [])
        if taints:
            taints.pop()
        else:
            taints.append({"key": "maintenance", "effect": "NoSchedule"})
    elif what == "cordon":
        spec["unschedulable"] = not spec.get("unschedulable")
    elif what == "label":
        labels = meta(node).setdefault("labels", {})
        labels["nvidia.com/gpu.product"] = rnd.choice(
            ("NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3", "NVIDIA-L4")
        )
    elif what == "gpus":
        alloc = status.setdefault("allocatable", {})
        alloc["nvidia.com/gpu"] = str(rnd.choice((0, 1, 8)))
    elif what == "ready":
        for c in status.get("conditions") or []:
            if c.get("type") == "Ready":
                c["status"] = "False" if c.get("status") == "True" else "True"
    else:
        for c in status.get("conditions") or []:
            c["lastHeartbeatTime"] = c.get("lastHeartbeatTime")  # same value, new object
    src.put(node)
    return f"node {name_of(node)}: {what}"


def change_quota(src: MemorySource, rnd: random.Random) -> str:
    quotas = src.objects("ResourceQuota")
    if not quotas:
        return "no quotas"
    quota = _edit(src, rnd.choice(quotas))
    hard = quota.setdefault("spec", {}).setdefault("hard", {})
    for k in list(hard):
        if "gpu" in k:
            hard[k] = str(rnd.choice((0, 4, 64)))
    quota.setdefault("status", {})["hard"] = dict(hard)
    src.put(quota)
    return f"quota {ns_of(quota)}/{name_of(quota)}"


def new_event(src: MemorySource, rnd: random.Random) -> str:
    pods = _pods(src, pending=True)
    if not pods:
        return "nothing pending"
    pod = rnd.choice(pods)
    name = f"{name_of(pod)}.{rnd.randrange(10**6):x}"
    src.put({
        "apiVersion": "v1", "kind": "Event",
        "metadata": {"name": name, "namespace": ns_of(pod), "resourceVersion": name},
        "involvedObject": {"kind": "Pod", "name": name_of(pod), "namespace": ns_of(pod)},
        "reason": "FailedScheduling", "type": "Warning",
        "message": f"0/{len(src.objects('Node'))} nodes are available: 1 Insufficient nvidia.com/gpu.",
        "lastTimestamp": "2026-01-01T00:00:00Z", "count": 1,
    })  # fmt: skip
    return f"event for {ns_of(pod)}/{name_of(pod)}"


CHANGES = (
    bind_pending, finish_running, new_pending, crash_driver, change_node, change_quota, new_event,
)  # fmt: skip


@pytest.mark.parametrize(
    "path",
    [FIXTURES / "fleet-many-causes.yaml", DEMO, FIXTURES / "mixed-driver-and-full.yaml",
     FIXTURES / "kueue-pending.yaml", FIXTURES / "resourcequota-exceeded.yaml"],
    ids=lambda p: p.stem,
)  # fmt: skip
def test_a_kept_answer_is_always_the_fresh_answer(path: Path) -> None:
    rnd = random.Random(path.stem)
    src = _source(path)
    now = _now(src)
    memo = FleetMemo()
    _kept(src, memo, now)
    reused = triaged = 0
    for step in range(40):
        what = rnd.choice(CHANGES)(src, rnd)
        kept, fresh = _kept(src, memo, now), _fresh(src, now)
        assert _answer(kept) == _answer(fresh), f"step {step}: {what}"
        assert kept.triaged + kept.reused == fresh.triaged
        reused, triaged = reused + kept.reused, triaged + kept.triaged
    print(f"{path.stem}: kept {reused}, triaged {triaged}")
    assert reused > 0


def _on_nodes(src: MemorySource) -> int:
    """The stuck items that are pods bound to a node: their node's state moves (a driver
    restarting, GPUs joining), so every sweep triages them afresh."""
    items = stuck_workloads(src)
    bound = {
        (ns_of(p), name_of(p)) for p in src.objects("Pod") if (p.get("spec") or {}).get("nodeName")
    }
    return sum(i.key in bound for i in items)


def test_nothing_changed_nothing_triaged_again() -> None:
    src = _source(FIXTURES / "fleet-many-causes.yaml")
    now, memo = _now(src), FleetMemo()
    first = _kept(src, memo, now)
    again = _kept(src, memo, now)
    items = len(stuck_workloads(src))
    assert first.triaged == items > first.workloads > 10
    # Only what nothing blocks (it waits for something in motion) and pods on a node are
    # looked at again.
    on_nodes = _on_nodes(src)
    assert 0 < on_nodes < items
    assert again.triaged == len(again.waiting) + on_nodes
    assert again.reused == items - on_nodes
    assert _answer(again) == _answer(first)


def test_a_quota_change_touches_only_that_namespace() -> None:
    src = _source(FIXTURES / "fleet-many-causes.yaml")
    now, memo = _now(src), FleetMemo()
    first = _kept(src, memo, now)
    quota = next(q for q in src.objects("ResourceQuota") if ns_of(q) == "team-nlp")
    raised = _edit(src, quota)
    raised["spec"]["hard"]["requests.nvidia.com/gpu"] = "64"
    src.put(raised)
    again = _kept(src, memo, now)
    team_nlp = sum(1 for g in first.groups for m in g.members if m.namespace == "team-nlp")
    on_nodes = _on_nodes(src)
    assert team_nlp and 0 < again.triaged <= team_nlp + len(first.waiting) + on_nodes
    assert again.reused >= first.triaged - team_nlp - on_nodes
    assert _answer(again) == _answer(_fresh(src, now))


def test_a_node_heartbeat_triages_nothing_again() -> None:
    src = _source(FIXTURES / "fleet-many-causes.yaml")
    now, memo = _now(src), FleetMemo()
    first = _kept(src, memo, now)
    for node in src.objects("Node"):
        beat = _edit(src, node)
        for c in beat["status"].get("conditions") or []:
            c["lastHeartbeatTime"] = c.get("lastHeartbeatTime")
        src.put(beat)
    again = _kept(src, memo, now)
    assert again.reused == first.triaged - _on_nodes(src)
    assert _answer(again) == _answer(first)


def _afresh(src: MemorySource) -> MemorySource:
    """A source made anew from `src`'s objects: nothing remembered from earlier sweeps."""
    objects = [o for kind in ALL_KINDS if kind not in src.not_served for o in src.objects(kind)]
    return MemorySource(
        objects, cluster_name=src.cluster_name, not_served=src.not_served, scope=src.scope
    )


@pytest.mark.parametrize(
    "path", [FIXTURES / "fleet-many-causes.yaml", DEMO, FIXTURES / "mixed-driver-and-full.yaml"],
    ids=lambda p: p.stem,
)  # fmt: skip
def test_what_a_source_remembers_never_outlives_a_change(path: Path) -> None:
    """The work a source keeps between sweeps (every node judged once per pod shape, node
    health, the stack view) is redone when what it came from changed: a long-lived source
    answers as one made afresh from the same objects, change after change."""
    rnd = random.Random(f"afresh-{path.stem}")
    src = _source(path)
    now = _now(src)
    _fresh(src, now)
    for step in range(30):
        what = rnd.choice(CHANGES)(src, rnd)
        assert _answer(_fresh(src, now)) == _answer(_fresh(_afresh(src), now)), (
            f"step {step}: {what}"
        )


def test_a_triage_asking_what_an_index_files_has_each_key_noted_as_a_read() -> None:
    """Whether pods are filed under some owners, asked at once (as the sweep's search does):
    outside a triage, answered by the source's index; inside one, each key is a read the triage
    rests on, noted as `indexed` notes it, so that a kept answer is checked against it."""
    from triage.cluster.indexes import POD_OWNER
    from triage.cluster.reads import ReadLog
    from triage.fleet.source import SweepSource

    src = _source(DEMO)
    owned = {(ns_of(p), r["kind"], r["name"]) for p in src.objects("Pod")
             for r in meta(p).get("ownerReferences") or ()}  # fmt: skip
    assert owned
    keys = [*sorted(owned), ("nowhere", "Job", "gone")]
    shared = SweepSource(src)
    plain = shared.filed("Pod", POD_OWNER, keys)
    assert plain == [k in owned for k in keys]
    log = shared.state.log = ReadLog()
    assert shared.filed("Pod", POD_OWNER, keys) == plain
    noted = {k[-1]: v for k, v in log.deps.items() if k[2:4] == ("Pod", POD_OWNER)}
    assert {k: bool(v) for k, v in noted.items()} == dict(zip(keys, plain, strict=True))
