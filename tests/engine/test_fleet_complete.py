"""The fleet view leaves nothing stuck out: on every bundled snapshot, `why-pending` calls a pod
blocked at layer L if and only if `pending` lists the pod's workload under L, and a workload
the sweep cannot judge is listed as unknown, never dropped."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.builders import cluster, event, node, operator_pods, pod
from triage import MemorySource, load_snapshot
from triage.cluster.objects import Obj, name_of, ns_of, owner
from triage.engine import verdict
from triage.fleet import Sweep, sweep
from triage.model import Answer

ROOT = Path(__file__).parents[2]
SNAPSHOTS = [
    *sorted(p for p in (ROOT / "tests/fixtures").iterdir()
            if p.suffix in (".yaml", ".json") and p.name != "expected.yaml"),
    ROOT / "gpu_triage/demo/cluster.yaml",
]  # fmt: skip


def workload_of(src: MemorySource, pod: Obj) -> tuple[str, str]:
    """The nearest owner of `pod` that exists in the snapshot: its Deployment (through its
    ReplicaSet), its ReplicaSet, Job, StatefulSet or DaemonSet, else the pod itself."""
    ref, ns = owner(pod), ns_of(pod)
    if ref is None or src.get(ref[0], ref[1], namespace=ns) is None:
        return "Pod", name_of(pod)
    if ref[0] == "ReplicaSet":
        rs = src.get("ReplicaSet", ref[1], namespace=ns)
        up = owner(rs) if rs else None
        if up and up[0] == "Deployment" and src.get("Deployment", up[1], namespace=ns):
            return "Deployment", up[1]
    return ref


def listed(result: Sweep) -> dict[tuple[str, str, str], set[str]]:
    """(namespace, kind, name) -> the layers it is listed under ("unknown" for unknown)."""
    out: dict[tuple[str, str, str], set[str]] = {}
    for g in result.groups:
        for m in g.members:
            out.setdefault((m.namespace, m.kind, m.name), set()).add(g.layer.value)
    for m in result.unknown:
        out.setdefault((m.namespace, m.kind, m.name), set()).add("unknown")
    return out


@pytest.mark.parametrize("path", SNAPSHOTS, ids=lambda p: p.stem)
def test_why_pending_blocked_at_a_layer_iff_pending_lists_the_workload_there(path: Path) -> None:
    src = load_snapshot(path)
    result = sweep(load_snapshot(path))
    assert not result.errors, result.errors
    shown = listed(result)
    because: dict[tuple[str, str, str], set[str]] = {}  # what the pods of each workload say
    for p in src.objects("Pod"):
        v = verdict(src, namespace=ns_of(p), name=name_of(p))
        kind, name = workload_of(src, p)
        key = (ns_of(p), kind, name)
        if v.answer == Answer.BLOCKED:
            assert v.failing_layer is not None
            layer = v.failing_layer.value
            because.setdefault(key, set()).add(layer)
            assert layer in shown.get(key, set()), f"{key}: why-pending says {layer}: {v.headline}"
        elif v.answer == Answer.UNKNOWN:
            because.setdefault(key, set()).add("unknown")
            assert shown.get(key), f"{key} could not be judged and is not listed"
    # and only if: every listing rests on a pod of the workload (or, for a workload that made
    # no pod, on the workload itself) that why-pending calls blocked there
    for (ns, kind, name), layers in shown.items():
        if (ns, kind, name) not in because:
            v = verdict(src, namespace=ns, name=name)
            said = {v.failing_layer.value} if v.failing_layer else {v.answer.value}
            because[(ns, kind, name)] = said
        assert layers <= because[(ns, kind, name)], f"{ns}/{name}: listed under {layers}"


def test_a_pod_whose_owners_are_gone_is_listed_under_the_nearest_that_exists() -> None:
    full = [node("a1", gpus=1), operator_pods("a1"), pod("busy", node_name="a1", phase="Running")]
    rs = {
        "apiVersion": "apps/v1", "kind": "ReplicaSet",
        "metadata": {"name": "web-7f9", "namespace": "team-a",
                     "ownerReferences": [{"kind": "Deployment", "name": "web", "controller": True}]},
        "spec": {"replicas": 1},
    }  # fmt: skip
    src = cluster(*full, rs, pod("web-7f9-abc", owner=("ReplicaSet", "web-7f9")),
                  pod("api-5c4-xyz", owner=("ReplicaSet", "api-5c4")))  # fmt: skip
    result = sweep(src)
    members = {(m.kind, m.name) for g in result.groups for m in g.members}
    assert members == {("ReplicaSet", "web-7f9"), ("Pod", "api-5c4-xyz")}


def test_kubelet_rejections_are_blocked_at_the_layer_that_decides_them() -> None:
    def rejected(name: str, reason: str, message: str, **kw: object) -> Obj:
        status = {"phase": "Failed", "reason": reason, "message": f"Pod was rejected: {message}"}
        return pod(name, node_name="a1", phase="Failed", status=status, **kw)  # type: ignore[arg-type]

    src = cluster(
        node("a1"), operator_pods("a1"),
        rejected("out-gpu", "OutOfnvidia.com/gpu", "Node didn't have enough resource: "
                 "nvidia.com/gpu, requested: 1, used: 8, capacity: 8"),
        rejected("out-cpu", "OutOfcpu", "Node didn't have enough resource: cpu, requested: "
                 "4000, used: 94000, capacity: 96000", gpus=0),
        rejected("numa", "TopologyAffinityError", "Resources cannot be allocated with Topology "
                 "locality"),
        rejected("affinity", "NodeAffinity", "Predicate NodeAffinity failed"),
        pod("failed-app", node_name="a1", phase="Failed",
            status={"reason": "Error", "message": "exit 1"}),
    )  # fmt: skip
    got = {}
    for name in ("out-gpu", "out-cpu", "numa", "affinity", "failed-app"):
        v = verdict(src, namespace="team-a", name=name)
        got[name] = (v.answer.value, v.cause.code if v.cause else None)
    assert got == {
        "out-gpu": ("blocked", "device-plugin.admission-out-of"),
        "out-cpu": ("blocked", "scheduling.kubelet-rejected"),
        "numa": ("blocked", "device-plugin.topology-affinity"),
        "affinity": ("blocked", "scheduling.kubelet-rejected"),
        "failed-app": ("clear", None),  # it ran and failed: its own problem, no layer's
    }
    listed_names = {m.name for g in sweep(src).groups for m in g.members}
    assert listed_names == {"out-gpu", "out-cpu", "numa", "affinity"}


def test_a_stack_pod_that_fails_is_answered_at_its_layer_and_listed() -> None:
    plugin = operator_pods("a1", plugin="crash")
    src = cluster(node("a1", allocatable=0), plugin, pod("train"),
                  event(kind="Pod", name="train", reason="FailedScheduling",
                        message="0/1 nodes are available: 1 Insufficient nvidia.com/gpu."))  # fmt: skip
    dp = next(p for p in plugin if "device-plugin" in name_of(p))
    v = verdict(src, namespace=ns_of(dp), name=name_of(dp))
    assert v.failing_layer is not None and v.failing_layer.value == "device-plugin"
    groups = {g.layer.value: {m.name for m in g.members} for g in sweep(src).groups}
    assert "train" in groups["device-plugin"]
    assert any("device-plugin" in n for n in groups["device-plugin"] - {"train"})


def test_a_cpu_pod_crashing_on_a_node_with_a_broken_gpu_driver_is_not_a_driver_problem() -> None:
    crash = {"containerStatuses": [{"name": "main", "ready": False, "restartCount": 9, "state": {
        "waiting": {"reason": "CrashLoopBackOff", "message": "back-off 5m0s"}}}]}  # fmt: skip
    src = cluster(node("a1"), operator_pods("a1", driver="crash"),
                  pod("web", gpus=0, node_name="a1", phase="Running", status=crash))  # fmt: skip
    v = verdict(src, namespace="team-a", name="web")
    assert v.answer == Answer.CLEAR and "not a GPU layer problem" in v.headline
    assert "web" not in {m.name for g in sweep(src).groups for m in g.members}
