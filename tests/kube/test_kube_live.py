"""LiveSource through the real kubernetes client against the loopback fake API server."""

from __future__ import annotations

import json
import re
import socket
import time
from pathlib import Path

import pytest

from kube.errors import ConfigError, UnauthorizedError
from kube.live import LiveSource, connect
from kube.testing import FakeApiServer
from tests.builders import event, node, pod
from triage.cluster.events import by_subject, normalise_event
from triage.cluster.memory import MemorySource
from triage.cluster.source import ForbiddenError, UnavailableError


def test_connect_uses_current_context(api: FakeApiServer, kubeconfig: str) -> None:
    src = connect(kubeconfig=kubeconfig)
    assert src.cluster_name == "fake"
    assert src.objects("Node") == []


def test_unknown_context_is_a_one_line_config_error(kubeconfig: str) -> None:
    with pytest.raises(ConfigError, match="context 'nope' not found"):
        connect(kubeconfig=kubeconfig, context="nope")


def test_no_kubeconfig_outside_a_cluster(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(ConfigError, match="no kubeconfig found"):
        connect()


def test_list_follows_continue_tokens_and_adds_kind(api: FakeApiServer, kubeconfig: str) -> None:
    for i in range(1203):
        api.apply(pod(f"p{i:04d}", node_name="n1", gpus=0, phase="Running", selector={}))
    src = connect(kubeconfig=kubeconfig)
    pods = src.objects("Pod")
    assert sorted(p["metadata"]["name"] for p in pods) == [f"p{i:04d}" for i in range(1203)]
    assert {p["kind"] for p in pods} == {"Pod"}
    lists = [q for path, q in api.requests if path == "/api/v1/pods"]
    assert len(lists) == 3  # 500 + 500 + 203
    assert [("continue" in q) for q in lists] == [False, True, True]


def test_namespaced_list_and_get(api: FakeApiServer, kubeconfig: str) -> None:
    api.apply(pod("a", ns="team-a", gpus=0, phase="Running", selector={}))
    api.apply(pod("b", ns="team-b", gpus=0, phase="Running", selector={}))
    api.apply({"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "team-a"}})
    src = connect(kubeconfig=kubeconfig)
    assert [p["metadata"]["name"] for p in src.objects("Pod", namespace="team-b")] == ["b"]
    got = src.get("Pod", "a", namespace="team-a")
    assert got is not None and got["kind"] == "Pod" and got["spec"]["containers"]
    assert src.get("Pod", "a", namespace="team-b") is None
    assert src.get("Namespace", "team-a") is not None
    assert src.get("Namespace", "missing") is None


def test_missing_custom_resource_api_lists_empty(api: FakeApiServer, kubeconfig: str) -> None:
    api.not_installed = {"kueue.x-k8s.io", "scheduling.volcano.sh", "nvidia.com"}
    src = connect(kubeconfig=kubeconfig)
    assert src.objects("Workload", namespace="team-a") == []
    assert src.objects("Queue") == []
    assert src.objects("ClusterPolicy") == []
    assert src.get("ClusterQueue", "cq") is None


def test_forbidden_resourcequotas(api: FakeApiServer, kubeconfig: str) -> None:
    api.forbidden.add(("resourcequotas", "x"))
    src = connect(kubeconfig=kubeconfig)
    with pytest.raises(ForbiddenError) as info:
        src.objects("ResourceQuota", namespace="x")
    assert str(info.value) == (
        "cannot list resourcequotas in namespace x: grant list on resourcequotas in x"
    )
    assert info.value.__cause__ is not None
    assert src.objects("ResourceQuota", namespace="y") == []


def test_forbidden_namespace_get_and_custom_resource_names_group(
    api: FakeApiServer, kubeconfig: str
) -> None:
    api.forbidden |= {("namespaces", None), ("workloads", "*")}
    src = connect(kubeconfig=kubeconfig)
    with pytest.raises(ForbiddenError, match="cannot get namespaces at cluster scope"):
        src.get("Namespace", "team-a")
    with pytest.raises(
        ForbiddenError, match=re.escape("list on workloads.kueue.x-k8s.io in team-a")
    ):
        src.objects("Workload", namespace="team-a")


def test_unauthorized_names_the_server(api: FakeApiServer, kubeconfig: str) -> None:
    api.unauthorized = True
    with pytest.raises(UnauthorizedError, match=f"API at {api.url} rejected the credentials"):
        connect(kubeconfig=kubeconfig).objects("Node")


def test_server_error_is_unavailable(api: FakeApiServer, kubeconfig: str) -> None:
    api.fail_on["nodes"] = 503
    with pytest.raises(UnavailableError, match=f"API at {api.url} answered 503"):
        connect(kubeconfig=kubeconfig).objects("Node")


def test_closed_port_is_unavailable_quickly(tmp_path: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = f"http://127.0.0.1:{port}"
    cfg = {
        "apiVersion": "v1",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": {"token": "t"}}],
        "contexts": [{"name": "dead", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "dead",
    }
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps(cfg))
    src = connect(kubeconfig=str(path))
    started = time.monotonic()
    with pytest.raises(UnavailableError) as info:
        src.get("Pod", "p", namespace="ns")
    assert time.monotonic() - started < 3
    assert str(info.value) == f"cannot reach the Kubernetes API at {server}: connection refused"
    assert "\n" not in str(info.value)


def test_events_for_is_one_field_selected_request(api: FakeApiServer, kubeconfig: str) -> None:
    api.apply(
        event(event_name="e1", ns="team-a", kind="Pod", name="train", reason="FailedScheduling")
    )
    api.apply(event(event_name="e2", ns="team-a", kind="Pod", name="other", reason="Pulled"))
    api.apply(event(event_name="e3", ns="team-a", kind="Job", name="train", reason="FailedCreate"))
    api.apply(event(event_name="e4", ns="team-b", kind="Pod", name="train", reason="Pulled"))
    src = connect(kubeconfig=kubeconfig)
    before = len(api.requests)
    evs = src.events_for(namespace="team-a", kind="Pod", name="train")
    assert [e["metadata"]["name"] for e in evs] == ["e1"]
    assert evs[0]["kind"] == "Event"
    assert len(api.requests) == before + 1
    path, query = api.requests[-1]
    assert path == "/api/v1/namespaces/team-a/events"
    assert query["fieldSelector"] == "involvedObject.kind=Pod,involvedObject.name=train"
    # The fake server files events by what they are about, kept through changes.
    moved = event(event_name="e2", ns="team-a", kind="Pod", name="train", reason="Pulled")
    api.apply(moved)  # e2 is now about the pod too
    api.delete("Event", "e1", namespace="team-a")
    evs = connect(kubeconfig=kubeconfig).events_for(namespace="team-a", kind="Pod", name="train")
    assert [e["metadata"]["name"] for e in evs] == ["e2"]
    other = connect(kubeconfig=kubeconfig).events_for(namespace="team-a", kind="Pod", name="other")
    assert other == []


def test_a_cluster_wide_event_list_keeps_what_events_repeat_once(
    api: FakeApiServer, kubeconfig: str
) -> None:
    """A sweep lists every event of the cluster and holds them while it runs: events of one
    workload's pods that say the same hold one message, reason and namespace between them,
    each keeps its own names, and they read as listed."""
    said = "0/5000 nodes are available: 5000 Insufficient nvidia.com/gpu."
    for i in range(3):
        api.apply(event(event_name=f"train-{i}.1", kind="Pod", name=f"train-{i}",
                        reason="FailedScheduling", message=said))  # fmt: skip
    api.apply(event(event_name="job.1", kind="Job", name="train", reason="FailedCreate"))
    evs = connect(kubeconfig=kubeconfig).objects("Event")
    stored = {e["metadata"]["name"]: e for e in api.objects_of("Event")}
    assert len(evs) == len(stored) == 4
    for e in evs:
        assert normalise_event(e) == normalise_event(stored[e["metadata"]["name"]])
    assert by_subject(evs).keys() == by_subject(stored.values()).keys()
    pods = [e for e in evs if e["involvedObject"]["kind"] == "Pod"]
    assert len(pods) == 3 and len({id(e["message"]) for e in pods}) == 1
    for field in ("reason", "type", "lastTimestamp"):
        assert len({id(e[field]) for e in pods}) == 1, field
    assert len({id(e["metadata"]["namespace"]) for e in evs}) == 1
    assert len({id(e["involvedObject"]["kind"]) for e in pods}) == 1
    assert [e["metadata"]["name"] for e in pods] == ["train-0.1", "train-1.1", "train-2.1"]


def test_node_usage_reads_the_nodes_asked_about_then_all(
    api: FakeApiServer, kubeconfig: str
) -> None:
    objs = [
        node("n1"),
        node("n2"),
        pod("a", node_name="n1", gpus=2, cpu="500m", phase="Running", selector={}),
        pod("b", node_name="n1", gpus=1, cpu="1", phase="Running", selector={}),
        pod("done", node_name="n1", gpus=4, phase="Succeeded", selector={}),
        pod("failed", node_name="n2", gpus=4, phase="Failed", selector={}),
        pod("pending", gpus=8, phase="Pending", selector={}),
    ]
    for o in objs:
        api.apply(o)
    src = connect(kubeconfig=kubeconfig)
    usage = src.node_usage()
    assert src.node_usage() is usage  # one for the instance's lifetime
    before = len(api.requests)
    assert usage["n1"].requests["nvidia.com/gpu"] == 3
    assert usage["n1"].requests["cpu"] == 1500
    assert sorted(usage["n1"].pods) == ["team-a/a", "team-a/b"]
    assert usage.get("n1") is usage["n1"]  # read once
    assert "n2" not in usage
    active = "status.phase!=Succeeded,status.phase!=Failed"
    assert [(p, q["fieldSelector"]) for p, q in api.requests[before:]] == [
        ("/api/v1/pods", f"spec.nodeName=n1,{active}"),
        ("/api/v1/pods", f"spec.nodeName=n2,{active}"),
    ]
    expected = MemorySource(objs).node_usage()
    # Iterating needs every node: one list of every active pod.
    assert {n: (u.requests, sorted(u.pods)) for n, u in usage.items()} == {
        n: (u.requests, sorted(u.pods)) for n, u in expected.items()
    }
    assert api.requests[-1] == ("/api/v1/pods", {"limit": "500", "fieldSelector": active})
    assert len(api.requests) == before + 3


def test_live_source_is_a_cluster_source(kubeconfig: str) -> None:
    from triage.cluster.source import ClusterSource

    src: ClusterSource = connect(kubeconfig=kubeconfig)
    assert isinstance(src, LiveSource)
