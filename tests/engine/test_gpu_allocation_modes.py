"""Allocation beyond one whole GPU per device-plugin slot: MIG strategies and reconfiguration,
time-slicing/MPS sharing, node join lag and validator contradictions (same layer model)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from tests.builders import A100, cluster, node, operator_pods, pod
from triage import Layer, Status, triage
from triage.model import TriageReport

NOW = datetime(2026, 12, 2, 14, 0, tzinfo=UTC)


def _no_gpus(n: dict) -> dict:
    for key in ("capacity", "allocatable"):
        n["status"][key].pop("nvidia.com/gpu", None)
    return n


def run(*objs: object, now: datetime = NOW) -> TriageReport:
    return triage(cluster(*objs), namespace="team-a", name="train", now=now)  # type: ignore[arg-type]


def test_mig_reconfiguration_in_progress() -> None:
    n = _no_gpus(
        node(
            "a1",
            extra_labels={
                "nvidia.com/mig.config": "all-3g.40gb",
                "nvidia.com/mig.config.state": "pending",
            },
        )
    )
    r = run(n, operator_pods("a1"), pod("train", resource="nvidia.com/mig-3g.40gb"))
    assert r.failing_layer == Layer.DEVICE_PLUGIN
    f = r.finding(Layer.DEVICE_PLUGIN)
    assert "device-plugin.mig-reconfiguring" in f.codes
    assert "all-3g.40gb" in " ".join(f.evidence)


def _mig_failed() -> dict:
    return node(
        "a1",
        extra_labels={
            "nvidia.com/mig.config": "all-1g.10gb",
            "nvidia.com/mig.config.state": "failed",
        },
    )


def test_mig_reconfiguration_failed_is_the_mig_managers_routed_as_the_driver() -> None:
    r = run(_mig_failed(), operator_pods("a1"), pod("train", resource="nvidia.com/mig-1g.10gb"))
    assert r.failing_layer == Layer.DRIVER
    assert "driver.mig-config-failed" in r.finding(Layer.DRIVER).codes
    assert "nvidia.com/mig.config.state=failed" in " ".join(r.finding(Layer.DRIVER).evidence)
    assert r.owner is not None and r.owner.team == "gpu-infrastructure"


def test_whole_gpus_a_failed_mig_reconfiguration_left_in_place_still_serve() -> None:
    r = run(_mig_failed(), operator_pods("a1"), pod("train"))
    assert r.failing_layer is None


def test_whole_gpu_advertised_as_zero_on_a_mixed_mig_node() -> None:
    n = node("a1", gpus=8, allocatable=0, extra_resources={"nvidia.com/mig-1g.10gb": "56"})
    n["status"]["capacity"]["nvidia.com/gpu"] = "0"  # healthy node, the count is simply 0
    r = run(n, operator_pods("a1"), pod("train"))
    assert r.failing_layer == Layer.DEVICE_PLUGIN
    assert "device-plugin.mig-only" in r.finding(Layer.DEVICE_PLUGIN).codes


def test_mig_profile_the_node_is_not_partitioned_for() -> None:
    n = _no_gpus(node("a1", extra_resources={"nvidia.com/mig-1g.10gb": "56"}))
    r = run(n, operator_pods("a1"), pod("train", resource="nvidia.com/mig-3g.40gb"))
    assert r.failing_layer == Layer.DEVICE_PLUGIN
    f = r.finding(Layer.DEVICE_PLUGIN)
    assert "device-plugin.mig-profile-missing" in f.codes
    assert "nvidia.com/mig-1g.10gb: 56" in " ".join(f.evidence)


def test_mig_single_strategy_product_label_is_explained() -> None:
    n = node("a1", product=f"{A100}-MIG-1g.10gb", gpus=56)
    r = run(n, operator_pods("a1"), pod("train"))
    assert r.failing_layer == Layer.SCHEDULING
    assert "MIG single strategy" in " ".join(r.finding(Layer.SCHEDULING).evidence)


def test_time_slicing_allocatable_above_physical_count_is_not_a_fault() -> None:
    shared = {"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.sharing-strategy": "time-slicing"}
    n = node("a1", gpus=32, extra_labels=shared)
    n["metadata"]["labels"]["nvidia.com/gpu.count"] = "8"
    r = run(n, operator_pods("a1"), pod("train", gpus=1))
    assert r.failing_layer is None
    assert all(f.status in (Status.OK, Status.SKIPPED) for f in r.findings)


def test_renamed_shared_resource() -> None:
    n = _no_gpus(node("a1", extra_resources={"nvidia.com/gpu.shared": "32"}))
    r = run(n, operator_pods("a1"), pod("train", resource="nvidia.com/gpu"))
    assert r.failing_layer == Layer.DEVICE_PLUGIN
    f = r.finding(Layer.DEVICE_PLUGIN)
    assert "device-plugin.resource-renamed" in f.codes
    assert "nvidia.com/gpu.shared: 32" in " ".join(f.evidence)


def _joined(minutes: int) -> dict:
    n = _no_gpus(node("a1"))
    n["status"]["conditions"][0]["lastTransitionTime"] = (
        NOW - timedelta(minutes=minutes)
    ).isoformat()
    return n


def _installing(node_name: str) -> list[dict]:
    ops = operator_pods(node_name)
    driver = ops[0]
    driver["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
    driver["status"]["containerStatuses"] = [
        {"name": "nvidia-driver-ctr", "ready": False, "state": {"running": {}}}
    ]
    return ops


def test_node_that_just_joined_is_waited_for_not_blamed() -> None:
    r = run(_joined(4), _installing("a1"), pod("train"))
    assert r.failing_layer is None
    assert r.headline.startswith("not blocked, waiting")
    assert "GPU stack still coming up on node a1 (since 4 min)" in r.headline
    assert "the pod has waited 60 min" in r.headline


def test_past_the_grace_period_it_is_a_failure() -> None:
    r = run(_joined(40), _installing("a1"), pod("train"))
    assert r.failing_layer == Layer.DRIVER


def test_crash_looping_driver_is_a_failure_even_on_a_new_node() -> None:
    r = run(_joined(3), operator_pods("a1", driver="crash"), pod("train"))
    assert r.failing_layer == Layer.DRIVER


def _validator(node_name: str, *, ready: bool, stuck_at: str | None = None) -> dict:
    p = pod(
        f"nvidia-operator-validator-{node_name}",
        ns="gpu-operator",
        gpus=0,
        node_name=node_name,
        phase="Running" if ready else "Pending",
        selector={},
        labels={"app": "nvidia-operator-validator"},
    )
    inits = []
    for name in ("driver-validation", "toolkit-validation", "cuda-validation", "plugin-validation"):
        if name == stuck_at:
            inits.append({"name": name, "ready": False, "state": {"running": {}}})
            stuck_at = "done"
        elif stuck_at == "done":
            inits.append(
                {"name": name, "ready": False, "state": {"waiting": {"reason": "PodInitializing"}}}
            )
        else:
            inits.append(
                {
                    "name": name,
                    "ready": True,
                    "state": {"terminated": {"exitCode": 0, "reason": "Completed"}},
                }
            )
    p["status"]["initContainerStatuses"] = inits
    p["status"]["conditions"] = [{"type": "Ready", "status": "True" if ready else "False"}]
    return p


def test_validator_ready_while_device_plugin_fails_is_a_contradiction() -> None:
    r = run(
        _no_gpus(node("a1")),
        operator_pods("a1", plugin="crash"),
        _validator("a1", ready=True),
        pod("train"),
    )
    assert r.failing_layer == Layer.DEVICE_PLUGIN
    driver = r.finding(Layer.DRIVER)
    assert "driver.validator-contradiction" in driver.codes
    assert "validator reports ready" in driver.summary
    assert any("device plugin:" in e for e in driver.evidence)


def test_validator_stuck_while_components_healthy_is_a_contradiction() -> None:
    busy = pod("other", ns="team-b", gpus=8, node_name="a1", phase="Running")
    r = run(
        node("a1"),
        operator_pods("a1"),
        busy,
        _validator("a1", ready=False, stuck_at="cuda-validation"),
        pod("train"),
    )
    assert r.failing_layer == Layer.SCHEDULING
    assert "stuck at cuda-validation" in r.finding(Layer.DRIVER).summary


def test_verification_does_not_flag_time_sliced_capacity() -> None:
    from triage.verify.node import CheckStatus, verify_node

    shared = {"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.sharing-strategy": "time-slicing"}
    n = node("a1", gpus=32, extra_labels=shared)
    n["metadata"]["labels"]["nvidia.com/gpu.count"] = "8"
    labels_check = verify_node(cluster(n, operator_pods("a1")), "a1").check("labels")
    assert labels_check.status == CheckStatus.PASS
    assert any("time-slicing with 4 replicas" in e for e in labels_check.evidence)
