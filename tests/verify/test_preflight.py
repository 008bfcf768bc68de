"""Preflight: the cluster-wide baseline before (or after) an operator install."""

from __future__ import annotations

from tests.verify.vbuild import build, cpu_node, gpu_node, healthy, namespace
from triage import MemorySource
from triage.verify.preflight import preflight


def test_baseline_of_a_healthy_cluster() -> None:
    p = preflight(build(healthy("g1"), healthy("g2"), cpu_node("cpu-01")))
    assert p.passed and not p.warnings
    assert [g.name for g in p.gpu_nodes] == ["g1", "g2"] and p.cpu_nodes == 1
    assert p.runtime_versions == {"containerd://1.7.22": 2}
    assert p.gpu_nodes[0].separated_by == ["taint nvidia.com/gpu=present:NoSchedule"]
    assert p.operator.installed and p.operator.namespace_exists and p.operator.runtime_class_exists
    assert p.missing_permissions is None


def test_before_install_unseparated_nodes_and_mixed_runtimes_warn() -> None:
    src = MemorySource(
        [gpu_node("g1", taints=[]), gpu_node("g2", runtime="cri-o://1.30.1"), cpu_node()],
        cluster_name="bare",
    )
    p = preflight(src)
    assert p.passed  # nothing installed yet is not a problem
    assert not p.operator.installed and p.operator.namespace_exists is False
    assert p.gpu_nodes[0].driver_strategy == "pre-installed (no GPU Operator found)"
    assert any(
        "1 GPU node(s) have no taint or node-pool label" in w and "g1" in w for w in p.warnings
    )
    assert any(
        w.startswith("GPU nodes run different container runtime versions") for w in p.warnings
    )


def test_no_gpu_nodes_and_missing_runtime_class_are_problems() -> None:
    p = preflight(build(cpu_node(), rc=False))
    assert not p.passed
    assert p.problems[0].startswith("no GPU nodes found")
    assert any("RuntimeClass nvidia does not exist" in x for x in p.problems)


def test_missing_permissions_fail_the_preflight() -> None:
    p = preflight(build(healthy("g1"))).with_permissions(["list pods (cluster-wide)"])
    assert not p.passed and p.problems == ["missing permission: list pods (cluster-wide)"]
    assert preflight(build(healthy("g1"))).with_permissions([]).passed


def test_empty_operator_namespace_warns() -> None:
    src = MemorySource([gpu_node("g1"), namespace("gpu-operator")], cluster_name="x")
    p = preflight(src)
    assert any("exists but no GPU Operator pods" in w for w in p.warnings)
