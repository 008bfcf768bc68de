"""The Kubernetes rules the engine re-implements must agree with the control plane's."""

from __future__ import annotations

import pytest

from triage.cluster.events import normalise_event
from triage.cluster.quantities import amount, pod_requests
from triage.cluster.selectors import selector_mismatch, tolerates, untolerated_taints


@pytest.mark.parametrize(
    ("resource", "value", "expected"),
    [
        ("cpu", "500m", 500),
        ("cpu", 2, 2000),
        ("cpu", "1.5", 1500),
        ("memory", "16Gi", 16 * 2**30),
        ("memory", "1G", 10**9),
        ("memory", "1e3", 1000),
        ("nvidia.com/gpu", "8", 8),
    ],
)
def test_quantities_parse_like_kubernetes(resource: str, value: object, expected: int) -> None:
    assert amount(resource, value) == expected


def test_malformed_quantity_is_rejected() -> None:
    with pytest.raises(ValueError, match="not a Kubernetes quantity"):
        amount("cpu", "lots")


def _container(**res: dict[str, str]) -> dict[str, object]:
    return {"name": "c", "resources": res}


def test_pod_requests_follow_scheduler_rules() -> None:
    pod = {
        "spec": {
            "containers": [
                _container(limits={"nvidia.com/gpu": "2"}, requests={"cpu": "4"}),
                _container(requests={"cpu": "1", "memory": "1Gi"}),
            ],
            # a big init container raises the pod's effective cpu above the containers' sum
            "initContainers": [_container(requests={"cpu": "8"})],
            "overhead": {"memory": "128Mi"},
        }
    }
    req = pod_requests(pod)
    assert req["nvidia.com/gpu"] == 2  # limits stand in for requests on extended resources
    assert req["cpu"] == 8000
    assert req["memory"] == 2**30 + 128 * 2**20


def test_sidecar_init_containers_add_to_the_pod() -> None:
    pod = {
        "spec": {
            "containers": [_container(requests={"cpu": "1"})],
            "initContainers": [
                {
                    "name": "proxy",
                    "restartPolicy": "Always",
                    "resources": {"requests": {"cpu": "500m"}},
                }
            ],
        }
    }
    assert pod_requests(pod)["cpu"] == 1500


def test_tolerations() -> None:
    taint = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    assert tolerates([{"key": "nvidia.com/gpu", "operator": "Exists"}], taint)
    assert tolerates([{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}], taint)
    assert not tolerates([{"key": "nvidia.com/gpu", "value": "absent"}], taint)
    assert not tolerates(
        [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}], taint
    )
    assert tolerates([{"operator": "Exists"}], taint)


def test_untolerated_taints_ignore_prefer_no_schedule() -> None:
    node = {
        "spec": {
            "taints": [
                {"key": "a", "effect": "PreferNoSchedule"},
                {"key": "b", "effect": "NoSchedule"},
            ]
        }
    }
    assert [t["key"] for t in untolerated_taints({"spec": {}}, node)] == ["b"]


def test_selector_and_affinity() -> None:
    node = {
        "metadata": {
            "name": "n1",
            "labels": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "zone": "a"},
        }
    }
    pod = {"spec": {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}}}
    assert selector_mismatch(pod, node) == [
        "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3 (node has NVIDIA-A100-SXM4-80GB)"
    ]
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]},
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
                ]
            }
        }
    }
    assert selector_mismatch({"spec": {"affinity": affinity}}, node) == []  # terms are ORed
    affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ].pop()
    assert selector_mismatch({"spec": {"affinity": affinity}}, node) == ["required node affinity"]


def test_events_of_both_shapes_normalise() -> None:
    new = normalise_event(
        {
            "reason": "FailedScheduling",
            "message": "0/3 nodes are available",
            "eventTime": "2026-12-02T13:00:00.000000Z",
            "series": {"count": 7, "lastObservedTime": "2026-12-02T13:50:00.000000Z"},
            "count": None,
            "lastTimestamp": None,
            "involvedObject": {"kind": "Pod", "name": "p"},
        }
    )
    old = normalise_event(
        {
            "reason": "FailedCreate",
            "message": "quota",
            "count": 3,
            "firstTimestamp": "2026-12-02T13:00:00Z",
            "lastTimestamp": "2026-12-02T13:40:00Z",
            "involvedObject": {"kind": "Job", "name": "j"},
        }
    )
    assert (new.times, new.last_seen and new.last_seen.minute) == (7, 50)
    assert (old.times, old.last_seen and old.last_seen.minute) == (3, 40)
