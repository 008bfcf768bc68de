"""Node verification on small clusters: one fixture per failure the template must catch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.verify.vbuild import (
    GPU_TAINT,
    OPNS,
    build,
    cluster_policy,
    cpu_node,
    gpu_node,
    healthy,
    operand,
    operands,
)
from triage import (
    InvalidNameError,
    Layer,
    MemorySource,
    NotFoundError,
    load_playbook,
    load_snapshot,
)
from triage.cluster.objects import Obj
from triage.cluster.source import ForbiddenError
from triage.playbooks import Playbook
from triage.verify.node import (
    CheckStatus,
    NodeVerification,
    probe_check,
    verify_node,
    verify_nodes,
    with_check,
)


def statuses(v: NodeVerification) -> dict[str, str]:
    return {c.name: c.status.value for c in v.checks}


def failing(v: NodeVerification) -> list[str]:
    return [c.name for c in v.checks if c.status == CheckStatus.FAIL]


def test_healthy_node_passes_every_check() -> None:
    v = verify_node(build(healthy("gpu-a100-01")), "gpu-a100-01")
    assert v.passed and v.failing_layer is None and v.owner is None
    assert set(statuses(v).values()) == {"pass"}, statuses(v)
    assert v.driver_strategy == "operator-managed"
    assert "containerRuntimeVersion: containerd://1.7.22" in v.check("container-runtime").evidence
    assert v.check("gpu-resources").summary == "nvidia.com/gpu=8"


def test_node_not_ready_fails_at_driver_layer() -> None:
    v = verify_node(build(healthy("gpu-a100-01", ready=False)), "gpu-a100-01")
    assert not v.passed and v.failing_layer == Layer.DRIVER
    assert "NodeStatusUnknown" in v.check("node-ready").summary
    assert v.owner is not None and v.owner.team == "gpu-infrastructure"


def test_crashing_driver_pod_routes_to_gpu_infrastructure_with_its_exit_message() -> None:
    src = build(gpu_node("gpu-a100-01"), operands("gpu-a100-01", states={"driver": "crash"}))
    v = verify_node(src, "gpu-a100-01")
    assert failing(v) == ["driver-pod"]
    assert v.failing_layer == Layer.DRIVER and v.owner and v.owner.team == "gpu-infrastructure"
    assert any(
        "Could not resolve Linux kernel version" in e for e in v.check("driver-pod").evidence
    )


def test_preinstalled_driver_skips_the_driver_pod_check() -> None:
    n = gpu_node("gpu-a100-01", extra_labels={"nvidia.com/gpu.deploy.driver": "pre-installed"})
    v = verify_node(build(n, operands("gpu-a100-01", skip=("driver",))), "gpu-a100-01")
    assert v.passed
    assert v.check("driver-pod").status == CheckStatus.SKIP
    assert v.driver_strategy == "pre-installed (nvidia.com/gpu.deploy.driver=pre-installed)"


def test_driver_disabled_in_cluster_policy_is_pre_installed_everywhere() -> None:
    src = build(
        gpu_node("g1"),
        operands("g1", skip=("driver",)),
        policy=cluster_policy(driver={"enabled": False}),
    )
    v = verify_node(src, "g1")
    assert v.passed and v.driver_strategy.startswith("pre-installed (ClusterPolicy")


def test_missing_operator_pod_fails_with_its_layer() -> None:
    v = verify_node(build(gpu_node("g1"), operands("g1", skip=("device-plugin",))), "g1")
    assert failing(v) == ["device-plugin-pod"]
    assert v.failing_layer == Layer.DEVICE_PLUGIN and v.owner and v.owner.team == "k8s-platform"
    assert v.check("device-plugin-pod").evidence == [
        "the GPU Operator should run a device plugin pod on g1, and none has spec.nodeName=g1"
    ]


@pytest.mark.parametrize("component", ["toolkit", "validator", "gfd", "dcgm-exporter"])
def test_every_operand_is_checked_on_the_node(component: str) -> None:
    v = verify_node(build(gpu_node("g1"), operands("g1", skip=(component,))), "g1")
    assert failing(v) == [f"{component}-pod"]


def test_running_but_not_ready_operand_fails() -> None:
    v = verify_node(build(gpu_node("g1"), operands("g1", states={"gfd": "notready"})), "g1")
    assert failing(v) == ["gfd-pod"]
    assert "not Ready" in v.check("gfd-pod").summary


def test_operand_disabled_by_node_label_or_policy_is_skipped() -> None:
    n = gpu_node("g1", extra_labels={"nvidia.com/gpu.deploy.dcgm-exporter": "false"})
    v = verify_node(build(n, operands("g1", skip=("dcgm-exporter", "gfd"))), "g1")
    assert v.check("dcgm-exporter-pod").status == CheckStatus.SKIP
    assert failing(v) == ["gfd-pod"]
    src = build(
        gpu_node("g1"), operands("g1", skip=("gfd",)), policy=cluster_policy(gfd={"enabled": False})
    )
    assert verify_node(src, "g1").passed


def test_missing_gpu_labels_fail_at_device_plugin_layer() -> None:
    n = gpu_node("g1")
    for k in ("nvidia.com/gpu.product", "nvidia.com/gpu.count"):
        del n["metadata"]["labels"][k]
    v = verify_node(build(n, operands("g1")), "g1")
    assert failing(v) == ["labels"]
    assert "nvidia.com/gpu.product, nvidia.com/gpu.count" in v.check("labels").summary
    assert v.failing_layer == Layer.DEVICE_PLUGIN


def test_count_label_disagreeing_with_capacity_warns() -> None:
    n = gpu_node("g1", extra_labels={"nvidia.com/gpu.count": "4"})
    v = verify_node(build(n, operands("g1")), "g1")
    assert v.passed and v.check("labels").status == CheckStatus.WARN


def test_allocatable_below_capacity_fails() -> None:
    v = verify_node(build(healthy("g1", allocatable=6)), "g1")
    assert failing(v) == ["gpu-resources"]
    assert "nvidia.com/gpu: capacity 8, allocatable 6" in v.check("gpu-resources").evidence
    assert any("2 device(s) unhealthy" in e for e in v.check("gpu-resources").evidence)


def test_no_gpu_resource_fails() -> None:
    v = verify_node(build(healthy("g1", gpus=0)), "g1")
    assert "gpu-resources" in failing(v)
    assert v.failing_layer == Layer.DEVICE_PLUGIN


def test_mig_resources_count_as_gpu_resources() -> None:
    n = gpu_node("g1", gpus=0, extra_resources={"nvidia.com/mig-1g.10gb": "14"})
    v = verify_node(build(n, operands("g1")), "g1")
    assert v.check("gpu-resources").status == CheckStatus.PASS
    assert v.check("gpu-resources").summary == "nvidia.com/mig-1g.10gb=14"


def test_unseparated_gpu_node_warns_but_passes() -> None:
    v = verify_node(build(healthy("g1", taints=[])), "g1")
    assert v.passed
    assert v.check("taints").status == CheckStatus.WARN
    assert v.check("taints").evidence == ["taints: none"]


def test_pool_label_counts_as_separation() -> None:
    v = verify_node(
        build(healthy("g1", taints=[], extra_labels={"gpu-triage.io/node-pool": "a100"})), "g1"
    )
    assert v.check("taints").status == CheckStatus.PASS
    assert "pool label gpu-triage.io/node-pool=a100" in v.check("taints").summary


def test_missing_runtime_class_fails_when_operator_installed() -> None:
    v = verify_node(build(healthy("g1"), rc=False), "g1")
    assert failing(v) == ["runtimeclass"] and v.failing_layer == Layer.DRIVER
    assert v.check("runtimeclass").evidence == ["RuntimeClasses present: none"]


def test_unknown_runtime_warns() -> None:
    v = verify_node(build(healthy("g1", runtime="")), "g1")
    assert v.passed and v.check("container-runtime").status == CheckStatus.WARN
    v = verify_node(build(healthy("g1", runtime="rkt://1.0")), "g1")
    assert v.check("container-runtime").status == CheckStatus.WARN


def test_no_operator_skips_operands_but_still_checks_resources() -> None:
    src = MemorySource([gpu_node("g1", gpus=0)], cluster_name="bare")
    v = verify_node(src, "g1")
    assert v.check("driver-pod").status == CheckStatus.SKIP
    assert v.check("runtimeclass").status == CheckStatus.WARN
    assert failing(v) == ["gpu-resources"]
    assert v.driver_strategy == "pre-installed (no GPU Operator found)"


def test_lowest_failing_layer_routes_and_node_pool_override_applies() -> None:
    pb = load_playbook()
    data: dict[str, Any] = pb.model_dump(mode="json")
    data["node_pools"]["routes"] = {"a100": {"device-plugin": {"team": "a100-pool-team"}}}
    custom = Playbook.model_validate(data)
    n = gpu_node("g1", extra_labels={"gpu-triage.io/node-pool": "a100"})
    v = verify_node(build(n, operands("g1", skip=("gfd",))), "g1", playbook=custom)
    assert v.owner is not None and v.owner.team == "a100-pool-team"
    assert v.owner.source == "node pool gpu-triage.io/node-pool=a100"
    both = verify_node(build(gpu_node("g1", ready=False), operands("g1", skip=("gfd",))), "g1")
    assert both.failing_layer == Layer.DRIVER


class Forbidding(MemorySource):
    def objects(self, kind: str, *, namespace: str | None = None) -> list[Obj]:
        if kind == "Pod":
            raise ForbiddenError(verb="list", resource="pods", namespace=namespace)
        return super().objects(kind, namespace=namespace)


def test_unreadable_operator_pods_warn_instead_of_passing_silently() -> None:
    src = Forbidding([gpu_node("g1"), *operands("g1")], cluster_name="x")
    v = verify_node(src, "g1")
    assert v.check("device-plugin-pod").status == CheckStatus.WARN
    assert any("cannot list pods" in e for e in v.check("device-plugin-pod").evidence)


def test_unknown_and_invalid_node_names() -> None:
    src = build(healthy("g1"))
    with pytest.raises(NotFoundError, match="node nope not found"):
        verify_node(src, "nope")
    with pytest.raises(InvalidNameError, match="invalid node name"):
        verify_node(src, "Bad_Name")


def test_verify_nodes_defaults_to_gpu_nodes_and_honours_selector() -> None:
    src = build(healthy("g1"), healthy("g2", allocatable=7), cpu_node("cpu-01"))
    assert [v.node for v in verify_nodes(src)] == ["g1", "g2"]
    assert [v.passed for v in verify_nodes(src)] == [True, False]
    picked = verify_nodes(src, selector={"kubernetes.io/hostname": "g2"})
    assert [v.node for v in picked] == ["g2"]
    assert verify_nodes(src, selector={"no": "match"}) == []


def test_probe_result_is_concluded_into_the_verification() -> None:
    src = build(healthy("g1"))
    v = verify_node(src, "g1")
    node = src.get("Node", "g1")
    assert node is not None
    bad = with_check(
        v,
        probe_check(outcome="failed", summary="exit 9", evidence=[]),
        node=node,
        playbook=load_playbook(),
    )
    assert not bad.passed and bad.failing_layer == Layer.DRIVER
    slow = with_check(
        v,
        probe_check(outcome="timeout", summary="slow", evidence=[]),
        node=node,
        playbook=load_playbook(),
    )
    assert slow.passed
    unsched = probe_check(outcome="unschedulable", summary="x", evidence=[])
    assert unsched.layer == Layer.DEVICE_PLUGIN
    with pytest.raises(ValueError):
        probe_check(outcome="weird", summary="", evidence=[])
    assert (
        GPU_TAINT["effect"] == "NoSchedule"
        and operand("g1", "gfd")["metadata"]["namespace"] == OPNS
    )


def test_a_node_the_operators_driver_daemonset_excludes_fails_its_driver_check() -> None:
    """issue 34: an arm64 node the driver DaemonSet's affinity excludes has no driver; the
    admission checklist says so (not "pre-installed"), and the driver check names why."""
    fixture = Path(__file__).parents[1] / "fixtures" / "arm64-driver-excluded.yaml"
    v = verify_node(load_snapshot(fixture), "gpu-h100-01")
    assert v.driver_strategy.startswith(
        "none: the GPU Operator's DaemonSet gpu-operator/nvidia-driver-daemonset does not reach"
    )
    check = next(c for c in v.checks if c.name == "driver-pod")
    assert check.status == CheckStatus.FAIL and check.layer == Layer.DRIVER
    assert "kubernetes.io/arch=arm64" in check.evidence[0]
