"""Access reviews and the test pod through the real kubernetes client against a loopback fake."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kube.access import missing_permissions, pod_write_permissions, required_reads
from kube.client import RawClient, load_client
from kube.testing import FakeApiServer
from kube.testpod import LABEL, TestPod, manifest, writes_enabled
from triage.cluster.source import KINDS, ForbiddenError, UnavailableError

POD = "gpu-triage-test-x0001"


@pytest.fixture
def fake() -> Iterator[FakeApiServer]:
    with FakeApiServer() as f:
        yield f


@pytest.fixture
def client(fake: FakeApiServer, tmp_path: Path) -> RawClient:
    api, name = load_client(kubeconfig=str(fake.write_kubeconfig(tmp_path / "kc")))
    return RawClient(api, cluster_name=name)


def test_required_reads_cover_every_kind_with_get_list_watch() -> None:
    perms = required_reads()
    assert len(perms) == 3 * len(KINDS) + 1
    assert {(p.group, p.resource) for p in perms if not p.name} == {
        (rt.group, rt.plural) for rt in KINDS.values()
    }
    assert "list events (cluster-wide)" in [str(p) for p in perms]
    # the status ConfigMap, by name: never every ConfigMap
    assert [str(p) for p in perms if p.resource == "configmaps"] == [
        "get configmaps cluster-autoscaler-status in namespace kube-system"
    ]


def test_access_review_lists_exactly_what_is_denied(fake: FakeApiServer, client: RawClient) -> None:
    assert missing_permissions(client) == []
    assert len(fake.writes.reviews) == 3 * len(KINDS) + 1
    assert fake.writes.reviews[-1]["name"] == "cluster-autoscaler-status"
    fake.writes.denied |= {("list", "", "events"), ("watch", "nvidia.com", "clusterpolicies")}
    assert missing_permissions(client) == [
        "watch clusterpolicies.nvidia.com (cluster-wide)",
        "list events (cluster-wide)",
    ]
    fake.writes.denied.add(("create", "", "pods"))
    assert missing_permissions(client, pod_write_permissions("gpu-checks")) == [
        "create pods in namespace gpu-checks"
    ]
    assert fake.writes.reviews[-2] == {
        "verb": "create",
        "group": "",
        "resource": "pods",
        "namespace": "gpu-checks",
    }


def test_access_review_unreachable_is_one_line(client: RawClient, fake: FakeApiServer) -> None:
    fake.fail_calls[("POST", "selfsubjectaccessreviews")] = 503
    with pytest.raises(UnavailableError, match="answered 503 to create selfsubject"):
        missing_permissions(client)


def _probe(client: RawClient, **kw: object) -> TestPod:
    clock = iter(float(i) for i in range(10_000))
    return TestPod(client, timeout=5, poll=0, sleep=lambda s: None, clock=lambda: next(clock), **kw)  # type: ignore[arg-type]


RUNNING = {"nodeName": "g1", "status": {"phase": "Running"}}
DONE = {"nodeName": "g1", "status": {"phase": "Succeeded"}}


def test_manifest_pins_one_gpu_to_the_node() -> None:
    m = manifest(node="g1")
    spec = m["spec"]
    assert m["metadata"]["labels"][LABEL] == "true" and spec["restartPolicy"] == "Never"
    assert spec["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert spec["containers"][0]["command"] == ["nvidia-smi"]
    assert spec["tolerations"] == [{"operator": "Exists"}]
    term = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert term["nodeSelectorTerms"][0]["matchFields"][0]["values"] == ["g1"]


def test_success_reports_and_deletes(fake: FakeApiServer, client: RawClient) -> None:
    fake.writes.script = [{"status": {"phase": "Pending"}}, RUNNING, DONE]
    r = _probe(client).run("g1")
    assert (r.outcome, r.scheduled, r.deleted) == ("succeeded", True, True)
    assert fake.methods("DELETE") == [f"/api/v1/namespaces/default/pods/{POD}"]
    assert fake.objects_of("Pod") == []


def test_container_start_failure_is_reported_with_events(
    fake: FakeApiServer, client: RawClient
) -> None:
    waiting = {
        "waiting": {
            "reason": "RunContainerError",
            "message": "nvidia-container-cli: initialization error: nvml error: driver not loaded",
        }
    }
    fake.writes.script = [
        {
            "nodeName": "g1",
            "status": {
                "phase": "Pending",
                "containerStatuses": [{"name": "nvidia-smi", "state": waiting}],
            },
        }
    ]
    fake.apply(
        {
            "kind": "Event",
            "apiVersion": "v1",
            "metadata": {"name": "e1", "namespace": "default"},
            "involvedObject": {"kind": "Pod", "name": POD, "namespace": "default"},
            "reason": "Failed",
            "message": "Error: failed to create containerd task",
            "type": "Warning",
            "lastTimestamp": "2026-12-02T13:00:00Z",
        }
    )
    r = _probe(client).run("g1")
    assert r.outcome == "failed" and "driver not loaded" in r.summary
    assert "event Failed: Error: failed to create containerd task" in r.evidence
    assert r.deleted and len(fake.methods("DELETE")) == 1


def test_timeout_unscheduled_still_deletes(fake: FakeApiServer, client: RawClient) -> None:
    fake.writes.script = [
        {
            "status": {
                "phase": "Pending",
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "reason": "Unschedulable",
                        "message": "0/3 nodes are available: 1 Insufficient nvidia.com/gpu.",
                    }
                ],
            }
        }
    ]
    r = _probe(client).run("g1")
    assert r.outcome == "unschedulable" and not r.scheduled
    assert r.evidence == [
        "PodScheduled=False: 0/3 nodes are available: 1 Insufficient nvidia.com/gpu."
    ]
    assert fake.methods("DELETE") == [f"/api/v1/namespaces/default/pods/{POD}"]


def test_timeout_after_binding(fake: FakeApiServer, client: RawClient) -> None:
    fake.writes.script = [RUNNING]
    r = _probe(client).run("g1")
    assert r.outcome == "timeout" and r.scheduled and r.deleted


def test_api_error_after_create_still_deletes(fake: FakeApiServer, client: RawClient) -> None:
    fake.fail_calls[("GET", f"/pods/{POD}")] = 500
    with pytest.raises(UnavailableError, match="answered 500"):
        _probe(client).run("g1")
    assert fake.methods("DELETE") == [f"/api/v1/namespaces/default/pods/{POD}"]


def test_interrupt_still_deletes(fake: FakeApiServer, client: RawClient) -> None:
    fake.writes.script = [RUNNING]

    def interrupt(_: float) -> None:
        raise KeyboardInterrupt

    probe = TestPod(client, timeout=60, poll=1, sleep=interrupt)
    with pytest.raises(KeyboardInterrupt):
        probe.run("g1")
    assert fake.methods("DELETE") == [f"/api/v1/namespaces/default/pods/{POD}"]


def test_failed_delete_is_reported_not_hidden(fake: FakeApiServer, client: RawClient) -> None:
    fake.writes.script = [DONE]
    fake.fail_calls[("DELETE", f"/pods/{POD}")] = 500
    r = _probe(client).run("g1")
    assert r.outcome == "succeeded" and r.deleted is False


def test_forbidden_create_names_the_grant(fake: FakeApiServer, client: RawClient) -> None:
    fake.fail_calls[("POST", "/namespaces/default/pods")] = 403
    with pytest.raises(ForbiddenError, match="grant create on pods in default"):
        _probe(client).run("g1")
    assert fake.methods("DELETE") == []


def test_writes_are_off_unless_enabled() -> None:
    assert not writes_enabled(flag=False, environ={})
    assert writes_enabled(flag=True, environ={})
    assert writes_enabled(flag=False, environ={"GPU_TRIAGE_ALLOW_WRITES": "1"})
    assert not writes_enabled(flag=False, environ={"GPU_TRIAGE_ALLOW_WRITES": "0"})
