"""The node autoscaler's and the scheduler's preemption answers (issue 19): a node on its way
is waiting, an autoscaler that cannot add one is the cause and goes to the platform."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from triage import load_snapshot, triage
from triage.cluster.events import Event
from triage.layers.scheduling.autoscaler import ScalingReads, autoscaler_signals

FIXTURES = Path(__file__).parents[1] / "fixtures"
NOW = datetime(2026, 12, 2, 14, 0, tzinfo=UTC)


def ev(reason: str, message: str, *, minutes_ago: float = 2) -> Event:
    return Event(reason=reason, message=message, type="Normal", times=1,
                 last_seen=NOW - timedelta(minutes=minutes_ago), kind="Pod", name="p")  # fmt: skip


def codes(events: list[Event], pod: dict | None = None) -> list[str]:  # type: ignore[type-arg]
    return [s.code for s in autoscaler_signals(pod or {}, events, now=NOW)]


def test_max_size_routes_to_the_platform_with_the_group_reason() -> None:
    r = triage(load_snapshot(FIXTURES / "autoscaler-max-size.yaml"),
               namespace="team-vision", name="detr-train-0")  # fmt: skip
    # the event names no group: the status ConfigMap does, with its size
    assert r.headline.startswith(
        "scheduling: cluster-autoscaler cannot add a node: node group(s) eks-gpu-a100-2c4b7f "
        "(2/2 nodes) at their maximum size (1 max node group size reached"
    )
    assert r.owner is not None and r.owner.team == "k8s-platform"
    assert "cluster-autoscaler-status" in r.remediation[0]


def test_a_triggered_scale_up_is_waiting_not_blocked() -> None:
    r = triage(load_snapshot(FIXTURES / "autoscaler-scale-up.yaml"),
               namespace="team-vision", name="detr-train-0")  # fmt: skip
    assert r.failing_layer is None
    assert r.headline.startswith(
        "not blocked, waiting for a new node: cluster-autoscaler is scaling up "
        "eks-gpu-a100-2c4b7f 2->3 (max 6)"
    )
    assert "the pod has waited 37 min" in r.headline


def test_karpenter_limits_name_the_nodepool() -> None:
    r = triage(load_snapshot(FIXTURES / "karpenter-limits.yaml"),
               namespace="team-vision", name="detr-train-0")  # fmt: skip
    assert "NodePool gpu-a100 has reached its limits" in r.headline
    assert r.owner is not None and r.owner.team == "k8s-platform"
    # Karpenter's FailedScheduling is not parsed as the scheduler's own message
    assert not any("Failed to schedule pod" in e and e.startswith("scheduler (")
                   for f in r.findings for e in f.evidence)  # fmt: skip


@pytest.mark.parametrize(
    ("message", "code"),
    [
        ("pod didn't trigger scale-up: 2 max node group size reached", "scheduling.autoscaler-max-size"),
        ("pod didn't trigger scale-up: 1 in backoff after failed scale-up, 3 node(s) didn't match "
         "Pod's node affinity/selector", "scheduling.autoscaler-backoff"),
        ("pod didn't trigger scale-up (it wouldn't fit if a new node is added): 1 Insufficient "
         "nvidia.com/gpu", "scheduling.autoscaler-no-fit"),
        ("pod didn't trigger scale-up:", "scheduling.autoscaler-no-fit"),
    ],
)  # fmt: skip
def test_not_triggered_reasons_in_both_wordings(message: str, code: str) -> None:
    (signal,) = autoscaler_signals({}, [ev("NotTriggerScaleUp", message)], now=NOW)
    assert signal.code == code
    assert "()" not in signal.summary and "  " not in signal.summary


def test_the_newest_autoscaler_event_wins() -> None:
    older = ev("NotTriggerScaleUp", "pod didn't trigger scale-up: 1 max node group size reached",
               minutes_ago=20)  # fmt: skip
    newer = ev("TriggeredScaleUp", "pod triggered scale-up: [{gpu-a100 1->2 (max: 4)}]")
    assert codes([older, newer]) == ["scheduling.scale-up-in-progress"]
    assert codes([newer, older]) == ["scheduling.scale-up-in-progress"]


def test_a_scale_up_with_no_node_after_15_minutes_has_stalled() -> None:
    old = ev("TriggeredScaleUp", "pod triggered scale-up: [{gpu-a100 1->2 (max: 4)}]",
             minutes_ago=40)  # fmt: skip
    (signal,) = autoscaler_signals({}, [old], now=NOW)
    assert signal.code == "scheduling.scale-up-stalled"
    assert "gpu-a100 1->2 (max 4) (40 min ago)" in signal.summary


def test_karpenter_nominated_claim_is_waiting() -> None:
    nominated = ev("Nominated", "Pod should schedule on: nodeclaim/gpu-a100-x7k2p")
    (signal,) = autoscaler_signals({}, [nominated], now=NOW)
    assert signal.code == "scheduling.scale-up-in-progress"
    assert "nodeclaim/gpu-a100-x7k2p" in signal.summary


def test_a_nominated_node_means_preemption_is_making_room() -> None:
    (signal,) = autoscaler_signals({"status": {"nominatedNodeName": "gpu-a100-02"}}, [], now=NOW)
    assert signal.code == "scheduling.preempting" and "gpu-a100-02" in signal.summary


def test_no_event_no_signal() -> None:
    assert codes([]) == []


def _cli(file: str, ns: str, name: str) -> dict[str, Any]:
    import json
    import subprocess
    import sys

    fixtures = Path(__file__).parents[1] / "fixtures"
    p = subprocess.run(
        [str(Path(sys.executable).with_name("gpu-triage")), "why-pending", name, "-n", ns,
         "--snapshot", str(fixtures / file), "--format", "json"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert p.returncode == 0 and not p.stderr, p.stderr
    return json.loads(p.stdout)  # type: ignore[no-any-return]


def test_an_autoscaler_that_says_nothing_about_a_long_pending_pod_is_not_acting() -> None:
    report = _cli("autoscaler-silent.yaml", "team-vision", "detr-train-0")
    sched = next(f for f in report["findings"] if f["layer"] == "scheduling")
    assert sched["codes"][0] == "scheduling.autoscaler-silent"
    assert "kube-system/cluster-autoscaler runs but has said nothing" in report["headline"]
    assert report["owner"]["team"] == "k8s-platform"
    assert "cluster-autoscaler-status" in " ".join(report["remediation"])


def test_a_preempting_pod_waits_for_its_victims_named_only_to_operators() -> None:
    report = _cli("preempting-victims.yaml", "team-vision", "ranker-0")
    assert report["failing_layer"] is None
    assert "waiting for 1 lower-priority pod(s) to leave node gpu-a100-01" in report["headline"]
    sched = next(f for f in report["findings"] if f["layer"] == "scheduling")
    assert "terminating: 1 pod(s) in other namespaces" in sched["evidence"]
    assert not any("llm-sweep" in e for e in sched["evidence"])
    assert any("victim on gpu-a100-01: team-nlp/llm-sweep-" in d for d in sched["detail"])


def test_a_recent_pending_pod_is_not_called_ignored_by_the_autoscaler() -> None:
    pod = {"status": {"conditions": [{"type": "PodScheduled", "status": "False",
                                      "lastTransitionTime": "2025-01-01T00:55:00Z"}]}}  # fmt: skip
    now = datetime(2025, 1, 1, 1, 0, tzinfo=UTC)
    assert (
        autoscaler_signals(
            pod, [], now=now, reads=ScalingReads(autoscalers=lambda: ["kube-system/ca"])
        )
        == []
    )
    later = datetime(2025, 1, 1, 1, 30, tzinfo=UTC)
    (silent,) = autoscaler_signals(
        pod, [], now=later, reads=ScalingReads(autoscalers=lambda: ["kube-system/ca"])
    )
    assert silent.code == "scheduling.autoscaler-silent" and "35 min" in silent.summary
    assert autoscaler_signals(pod, [], now=later, reads=ScalingReads(autoscalers=lambda: [])) == []


def test_a_nodeclaim_that_failed_to_launch_is_the_cause_not_a_wait() -> None:
    report = _cli("karpenter-launch-failed.yaml", "team-vision", "detr-train-0")
    assert report["failing_layer"] == "scheduling"
    assert "could not launch NodeClaim gpu-a100-x7k2p" in report["headline"]
    assert "InsufficientInstanceCapacity" in report["headline"]
    assert report["owner"]["team"] == "k8s-platform"


def test_the_nodepool_limits_show_which_one_is_reached() -> None:
    report = _cli("karpenter-limits.yaml", "team-vision", "detr-train-0")
    sched = next(f for f in report["findings"] if f["layer"] == "scheduling")
    assert (
        "NodePool gpu-a100 limits (in use/limit): cpu 192/1000, nvidia.com/gpu 16/16 (reached)"
        in sched["evidence"]
    )


def test_a_stale_autoscaler_status_means_it_is_not_running() -> None:
    report = _cli("autoscaler-down.yaml", "team-vision", "detr-train-0")
    assert "cluster-autoscaler last updated its status 186 min ago" in report["headline"]
    assert report["owner"]["team"] == "k8s-platform"


def test_the_status_configmap_names_the_group_at_its_maximum() -> None:
    report = _cli("autoscaler-max-size.yaml", "team-vision", "detr-train-0")
    sched = next(f for f in report["findings"] if f["layer"] == "scheduling")
    assert any("node group eks-gpu-a100-2c4b7f: at its maximum (2/2 nodes)" in e for e in sched["evidence"])  # fmt: skip
    assert not any("eks-gpu-h100" in e for e in sched["evidence"])  # healthy groups stay out


@pytest.mark.parametrize(
    "text",
    [
        "Cluster-autoscaler status at 2025-01-01 00:58:10.1 +0000 UTC:\nCluster-wide:\n  Health: Healthy",
        "autoscalerStatus: Running\ntime: 2025-01-01 00:58:10.123456789 +0000 UTC\nnodeGroups: [7",
        "nodeGroups:\n- name: g\n  health: {cloudProviderTarget: 3, maxSize: 3}\n  scaleUp:\n    status: Backoff\n    backoffInfo: {errorCode: QUOTA_EXCEEDED, errorMessage: \"Quota 'GPUS' exceeded\"}\ntime: 2025-01-01 00:58:10 +0000 UTC",
    ],
)  # fmt: skip
def test_status_configmap_in_every_shape_reads_without_error(text: str) -> None:
    from triage.layers.scheduling.autoscaler import CaStatus

    status = CaStatus.read({"data": {"status": text}})
    assert status is not None
    assert status.age(datetime(2025, 1, 1, 1, 0, tzinfo=UTC)) == timedelta(minutes=1, seconds=50)
    if "Backoff" in text:
        assert status.groups() == [
            "cluster-autoscaler-status (2025-01-01 00:58:10 UTC): node group g: at its maximum "
            "(3/3 nodes); in backoff: QUOTA_EXCEEDED Quota 'GPUS' exceeded"
        ]
    assert CaStatus.read({"data": {}}) is None and CaStatus.read(None) is None
