"""The root-cause rule: the lowest layer that explains why *this* pod cannot run on the nodes
it could otherwise use. Each test isolates one decision with a decoy that would mislead a
naive reading."""

from __future__ import annotations

import pytest

from tests.builders import (
    A100,
    H100,
    OPNS,
    cluster,
    event,
    namespace,
    node,
    operator_pods,
    pod,
    without_gpus,
)
from triage import Layer, Status, TriageReport, triage


def _text(r: TriageReport) -> str:
    parts = [r.headline]
    for f in r.findings:
        parts += [f.summary, *f.evidence, *f.detail]
    return "\n".join(parts)


def run(*objs: object, name: str = "train", ns: str = "team-a") -> TriageReport:
    return triage(cluster(*objs), namespace=ns, name=name)  # type: ignore[arg-type]


def test_driver_crash_on_every_matching_node_is_the_cause_despite_scheduler_saying_insufficient() -> (
    None
):
    r = run(
        without_gpus(node("a1")),
        operator_pods("a1", driver="crash"),
        node("h1", product=H100),
        operator_pods("h1"),
        pod("train", gpus=2),
        event(kind="Pod", name="train", reason="FailedScheduling",
              message="0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) didn't match Pod's node affinity/selector."),
    )  # fmt: skip
    assert r.failing_layer == Layer.DRIVER
    assert r.owner is not None and r.owner.team == "gpu-infrastructure"
    text = _text(r)
    assert "a1" in text and "Insufficient nvidia.com/gpu" in text
    assert "h1" not in r.finding(Layer.DRIVER).summary


def test_same_answer_without_events() -> None:
    r = run(without_gpus(node("a1")), operator_pods("a1", driver="crash"), pod("train", gpus=2))
    assert r.failing_layer == Layer.DRIVER


def test_driver_crash_on_a_node_the_pod_cannot_use_is_only_a_side_finding() -> None:
    full = [
        pod(f"other-{i}", ns="team-b", gpus=4, node_name="a1", phase="Running") for i in range(2)
    ]
    r = run(
        node("a1"), operator_pods("a1"), *full,
        without_gpus(node("l4", product="NVIDIA-L4", gpus=4)), operator_pods("l4", driver="crash"),
        pod("train", gpus=2),
    )  # fmt: skip
    assert r.failing_layer == Layer.SCHEDULING
    assert r.finding(Layer.DRIVER).status == Status.WARN
    driver = r.finding(Layer.DRIVER)
    assert "node l4" in driver.summary and "cannot use that node anyway" in driver.summary
    assert "8/8 nvidia.com/gpu" in _text(r)
    # other tenants' pods on the node are operator-only detail
    assert not any("other-0" in e for f in r.findings for e in f.evidence)
    assert any("team-b/other-0" in d for d in r.finding(Layer.SCHEDULING).detail)


def test_one_healthy_free_node_means_lower_layers_do_not_block() -> None:
    r = run(
        without_gpus(node("a1")), operator_pods("a1", driver="crash"),
        node("a2"), operator_pods("a2"),
        pod("train", gpus=2),
    )  # fmt: skip
    assert r.failing_layer is None
    assert r.finding(Layer.DRIVER).status == Status.WARN


def test_healthy_full_node_plus_broken_node_blames_the_lowest_layer() -> None:
    full = [
        pod(f"other-{i}", ns="team-b", gpus=8, node_name="a1", phase="Running") for i in range(1)
    ]
    r = run(
        node("a1"), operator_pods("a1"), *full,
        without_gpus(node("a2")), operator_pods("a2", driver="crash"),
        pod("train", gpus=2),
    )  # fmt: skip
    assert r.failing_layer == Layer.DRIVER
    assert r.finding(Layer.SCHEDULING).status == Status.FAIL  # capacity is short as well


def test_preinstalled_driver_without_driver_pods_is_not_a_failure() -> None:
    n = node("a1", extra_labels={"nvidia.com/gpu.deploy.driver": "pre-installed"})
    ops = [p for p in operator_pods("a1") if "driver" not in p["metadata"]["name"]]
    full = pod("other", ns="team-b", gpus=8, node_name="a1", phase="Running")
    r = run(n, ops, full, pod("train", gpus=1))
    assert r.failing_layer == Layer.SCHEDULING
    assert r.finding(Layer.DRIVER).status == Status.OK


def test_operator_managed_node_without_driver_pod_fails_driver() -> None:
    ops = [p for p in operator_pods("a1") if "driver" not in p["metadata"]["name"]]
    r = run(without_gpus(node("a1")), ops, pod("train"))
    assert r.failing_layer == Layer.DRIVER
    assert "driver.pod-missing" in r.finding(Layer.DRIVER).codes


def test_node_not_ready_is_driver_layer() -> None:
    r = run(node("a1", ready=False), operator_pods("a1"), pod("train"))
    assert r.failing_layer == Layer.DRIVER
    assert "driver.node-not-ready" in r.finding(Layer.DRIVER).codes


def test_device_plugin_crash_with_driver_healthy() -> None:
    r = run(without_gpus(node("a1")), operator_pods("a1", plugin="crash"), pod("train"))
    assert r.failing_layer == Layer.DEVICE_PLUGIN
    assert r.owner is not None and r.owner.team == "k8s-platform"


def test_unhealthy_devices_explain_a_shortfall() -> None:
    busy = pod("other", ns="team-b", gpus=6, node_name="a1", phase="Running")
    r = run(node("a1", gpus=8, allocatable=6), operator_pods("a1"), busy, pod("train", gpus=2))
    assert r.failing_layer == Layer.DEVICE_PLUGIN
    assert "device-plugin.unhealthy-devices" in r.finding(Layer.DEVICE_PLUGIN).codes


def test_whole_gpu_request_on_mig_only_nodes() -> None:
    n = without_gpus(
        node(
            "a1",
            extra_resources={"nvidia.com/mig-1g.10gb": "56"},
            extra_labels={"nvidia.com/mig.strategy": "mixed"},
        )
    )
    r = run(n, operator_pods("a1"), pod("train", gpus=1))
    assert r.failing_layer == Layer.DEVICE_PLUGIN
    assert "device-plugin.mig-only" in r.finding(Layer.DEVICE_PLUGIN).codes
    assert "nvidia.com/mig-1g.10gb" in _text(r)


@pytest.mark.parametrize(
    ("objs", "code"),
    [
        ([node("a1", product=A100)], "scheduling.selector-mismatch"),
        ([node("h1", product=H100, taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}])], "scheduling.untolerated-taint"),
        ([node("h1", product=H100, gpus=8)], "scheduling.request-too-large"),
        ([node("c1", product=None)], "scheduling.no-gpu-nodes"),
    ],
)  # fmt: skip
def test_constraints_that_exclude_every_node(objs: list[dict], code: str) -> None:
    gpus = 16 if code == "scheduling.request-too-large" else 1
    r = run(
        *objs,
        pod(
            "train",
            gpus=gpus,
            selector={"nvidia.com/gpu.product": H100} if code != "scheduling.no-gpu-nodes" else {},
        ),
    )
    assert r.failing_layer == Layer.SCHEDULING
    assert code in r.finding(Layer.SCHEDULING).codes


def test_cordoned_and_cpu_exhausted() -> None:
    r = run(node("a1", cordoned=True), operator_pods("a1"), pod("train"))
    assert r.failing_layer == Layer.SCHEDULING
    assert "scheduling.cordoned" in r.finding(Layer.SCHEDULING).codes
    busy = pod("cpu-hog", ns="team-b", gpus=0, cpu="90", node_name="a1", phase="Running")
    r = run(node("a1"), operator_pods("a1"), busy, pod("train", cpu="16"))
    assert "scheduling.insufficient" in r.finding(Layer.SCHEDULING).codes
    assert "cpu" in _text(r)


def test_running_pod_has_no_failing_layer() -> None:
    r = run(node("a1"), operator_pods("a1"), pod("train", node_name="a1", phase="Running"))
    assert r.failing_layer is None
    assert "running" in r.headline
    assert r.owner is None


def test_running_phase_with_driver_error_is_driver() -> None:
    p = pod("train", node_name="a1", phase="Running", status={
        "containerStatuses": [{"name": "main", "ready": False, "state": {"waiting": {
            "reason": "RunContainerError",
            "message": "failed to create containerd task: nvidia-container-cli: initialization error: nvml error: driver not loaded"}}}]})  # fmt: skip
    r = run(node("a1"), operator_pods("a1"), p)
    assert r.failing_layer == Layer.DRIVER
    assert "driver.runtime-init-failed" in r.finding(Layer.DRIVER).codes


def test_missing_runtime_class() -> None:
    p = pod("train", node_name="a1", extra_spec={"runtimeClassName": "nvidia"})
    r = run(node("a1"), operator_pods("a1"), p)
    assert r.failing_layer == Layer.DRIVER
    assert "driver.runtimeclass-missing" in r.finding(Layer.DRIVER).codes


def test_admission_error_is_device_plugin() -> None:
    p = pod("train", node_name="a1", phase="Failed", status={
        "reason": "UnexpectedAdmissionError",
        "message": "Pod was rejected: Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. Requested: 1, Available: 0, which is unexpected"})  # fmt: skip
    r = run(node("a1"), operator_pods("a1"), p)
    assert r.failing_layer == Layer.DEVICE_PLUGIN
    assert "Allocate failed" in _text(r)


def test_workload_without_pods_blocked_by_quota_from_state_alone() -> None:
    job = {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": "pretrain", "namespace": "team-a"},
        "spec": {"parallelism": 1, "template": {"spec": pod("x", gpus=4)["spec"]}},
        "status": {},
    }  # fmt: skip
    quota = {
        "apiVersion": "v1", "kind": "ResourceQuota",
        "metadata": {"name": "gpu-quota", "namespace": "team-a"},
        "spec": {"hard": {"requests.nvidia.com/gpu": "8"}},
        "status": {"hard": {"requests.nvidia.com/gpu": "8"}, "used": {"requests.nvidia.com/gpu": "6"}},
    }  # fmt: skip
    r = run(
        node("a1"),
        operator_pods("a1"),
        job,
        quota,
        namespace("team-a", team="nlp"),
        name="pretrain",
    )
    assert r.failing_layer == Layer.QUOTA
    assert r.pod.kind == "Job" and r.pod.pod is None
    assert "gpu-quota" in _text(r) and "6/8" in _text(r)
    assert r.owner is not None and r.owner.team == "nlp" and "namespace" in r.owner.source


def test_non_kueue_scheduling_gate() -> None:
    p = pod("train", extra_spec={"schedulingGates": [{"name": "example.com/wait"}]})
    r = run(node("a1"), operator_pods("a1"), p)
    assert r.failing_layer == Layer.SCHEDULING
    assert "scheduling.gated" in r.finding(Layer.SCHEDULING).codes


def test_forbidden_read_makes_the_layer_unknown() -> None:
    from triage import ForbiddenError, MemorySource

    class NoQuota(MemorySource):
        def objects(self, kind: str, *, namespace: str | None = None) -> list[dict]:
            if kind == "ResourceQuota":
                raise ForbiddenError(verb="list", resource="resourcequotas", namespace=namespace)
            return super().objects(kind, namespace=namespace)

    src = cluster(node("a1"), operator_pods("a1"), pod("train", node_name="a1", phase="Running"))
    r = triage(
        NoQuota(src.objects("Node") + src.objects("Pod") + src.objects("Namespace")),
        namespace="team-a",
        name="train",
    )
    q = r.finding(Layer.QUOTA)
    assert q.status == Status.UNKNOWN
    assert "grant list on resourcequotas in team-a" in q.summary
    assert OPNS  # the operator namespace constant is shared with the builder
