"""Typed decoding of list pages (kube.slim.list_decoder) keeps exactly what the projections
read: over every pod and node of fixtures covering each GPU stack (kubectl output, noise
included), slimming a typed-decoded page gives the same objects as slimming the whole JSON."""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from kube.decode import list_decoder
from kube.share import Sharer
from kube.slim import projection
from triage import MalformedSnapshotError, load_snapshot
from triage.cluster.objects import Obj

# One fixture per GPU stack and object shape: the managed clouds, the operator in another
# namespace, a plugin-only install, DRA, MIG, Kueue, crash loops, init containers, claims.
FIXTURES = [
    Path(__file__).parents[1] / "fixtures" / f"{name}.yaml"
    for name in (
        "aks-plugin-untolerated", "eks-device-plugin-crash", "gke-driver-installer-crash",
        "operator-other-namespace", "helm-plugin-full", "dra-mixed-cluster", "mig-reconfiguring",
        "kueue-pod-gated", "driver-crashloop", "container-start-failed", "pvc-unbound",
        "preempting-victims", "node-join-stuck", "topology-spread-zone",
    )
]  # fmt: skip


@functools.cache
def _objects(kind: str) -> list[Obj]:
    found: list[Obj] = []
    for path in FIXTURES:
        try:
            found += load_snapshot(path).objects(kind)
        except MalformedSnapshotError:
            continue  # not a cluster dump (expected results)
    return found


def _ordered(value: Any) -> Any:
    """`value` with every mapping as the list of its items: compared, the order counts."""
    if isinstance(value, dict):
        return [(k, _ordered(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [_ordered(v) for v in value]
    return value


@pytest.mark.parametrize("projected", [False, True], ids=["typed", "for-projection"])
@pytest.mark.parametrize("kind", ["Pod", "Node"])
def test_typed_pages_slim_to_the_same_objects(kind: str, projected: bool) -> None:
    objs = _objects(kind)
    assert len(objs) > 20  # the fixtures hold many of each
    page = orjson.dumps({"kind": f"{kind}List", "metadata": {"resourceVersion": "7"},
                         "items": objs}, default=str)  # fmt: skip
    decode = list_decoder(kind, projected=projected)
    assert decode is not None
    typed, whole = decode(page), orjson.loads(page)
    assert typed["metadata"] == whole["metadata"]
    slim_typed, slim_whole = projection(kind), projection(kind)
    for a, b in zip(typed["items"], whole["items"], strict=True):
        made = slim_typed(a)
        assert _ordered(made) == _ordered(slim_whole(b)), a.get("metadata", {}).get("name")


@pytest.mark.parametrize("kind", ["Job", "ReplicaSet", "StatefulSet", "Deployment"])
def test_typed_workload_pages_slim_to_the_same_objects(kind: str) -> None:
    objs = _objects(kind)
    assert objs
    page = orjson.dumps({"metadata": {}, "items": objs}, default=str)
    decode = list_decoder(kind, projected=True)
    assert decode is not None and list_decoder(kind) is None  # kept whole but by the cache
    typed, whole = decode(page), orjson.loads(page)
    slim_typed, slim_whole = projection(kind), projection(kind)
    for a, b in zip(typed["items"], whole["items"], strict=True):
        made = slim_typed(a)
        assert _ordered(made) == _ordered(slim_whole(b)), a.get("metadata", {}).get("name")
        assert "managedFields" not in made["metadata"]


def test_the_projection_s_pod_spec_shape_names_every_field_the_typed_one_does() -> None:
    """Decoded for the projection, a spec keeps the same fields (most as text): a field added
    to one shape and not the other would be kept by one path of the cache and not the other."""
    from kube import decode

    assert decode._TextPodSpec.__annotations__.keys() == decode._PodSpec.__annotations__.keys()


def test_a_workload_s_pods_on_many_nodes_slim_from_one_template() -> None:
    """Decoded for the projection, the pods of one workload on several nodes (and one still
    waiting) slim to what their whole JSON slims to, field order included: each its own node,
    the rest of the spec (containers, tolerations) one shared object. A pod of the same
    template with a claim, or with another image, is not taken for them."""
    from tests.builders import pod

    pods = [pod(f"w-{i}", node_name=f"n{i}", gpus=1, phase="Running") for i in range(4)]
    pods.append(pod("w-waiting", gpus=1))
    pods.append(pod("w-4", node_name="n0", gpus=1, phase="Running"))  # n0's second
    other = pod("w-other", node_name="n1", gpus=1, phase="Running")
    other["spec"]["containers"][0]["image"] = "other:2"
    claimed = pod("w-claimed", node_name="n2", gpus=1, phase="Running")
    everything = [*pods, other, claimed]
    for p in everything:  # each its own token volume, mounted in its container, as pods have
        token = f"kube-api-access-{p['metadata']['name']}"
        p["spec"]["volumes"] = [{"name": token, "projected": {"sources": []}}]
        p["spec"]["containers"][0]["volumeMounts"] = [{"name": token, "mountPath": "/var/run"}]
    claimed["spec"]["volumes"].append({"name": "d", "persistentVolumeClaim": {"claimName": "d"}})
    page = orjson.dumps({"metadata": {}, "items": everything})
    decode = list_decoder("Pod", projected=True)
    assert decode is not None
    slim, slim_whole = projection("Pod"), projection("Pod")
    made = [slim(p) for p in decode(page)["items"]]
    for got, whole in zip(made, orjson.loads(page)["items"], strict=True):
        assert _ordered(got) == _ordered(slim_whole(whole))
    specs = [p["spec"] for p in made]
    assert [s.get("nodeName") for s in specs] == ["n0", "n1", "n2", "n3", None, "n0", "n1", "n2"]
    assert specs[5] is specs[0]  # one spec for a workload's pods on one node, mounts aside
    assert len({id(s["containers"]) for s in specs[:6]}) == 1
    assert specs[6]["containers"][0]["image"] == "other:2"
    assert specs[7]["volumes"] == [{"name": "d", "persistentVolumeClaim": {"claimName": "d"}}]
    assert "volumes" not in specs[2]


def test_a_page_of_unexpected_shape_is_decoded_whole() -> None:
    page = orjson.dumps({"metadata": {}, "items": [
        {"metadata": {"name": "odd", "namespace": "a"}, "spec": {"containers": "not a list"}}]})  # fmt: skip
    decode = list_decoder("Pod")
    assert decode is not None
    assert decode(page)["items"][0]["spec"]["containers"] == "not a list"


def test_kinds_kept_whole_have_no_typed_decoder() -> None:
    assert list_decoder("ResourceQuota") is None


def test_a_pod_keeps_its_uid_in_the_cache_only_when_a_claim_may_name_it() -> None:
    """A pod with claims keeps its uid (what a claim's reservations name it by); others do
    without it, and the engine reads the same reservations from either."""
    from triage.layers.scheduling.dra_devices import reserved_for_others

    base: Obj = {"kind": "Pod", "apiVersion": "v1",
                 "metadata": {"name": "train-0", "namespace": "a", "uid": "u-2"},
                 "spec": {"containers": [{"name": "c"}]}}  # fmt: skip
    claims = base | {"spec": {"containers": [{"name": "c"}], "resourceClaims": [{"name": "g"}]}}
    claim: Obj = {"status": {"reservedFor": [
        {"resource": "pods", "name": "train-0", "uid": "u-2"},
        {"resource": "pods", "name": "train-1", "uid": "u-7"}]}}  # fmt: skip
    slim = projection("Pod")
    assert "uid" not in slim(base)["metadata"]
    assert slim(claims)["metadata"]["uid"] == "u-2"
    assert reserved_for_others(claim, slim(claims)) == reserved_for_others(claim, claims)
    assert reserved_for_others(claim, claims) == ["train-1"]


def test_watch_events_decode_as_list_pages_do() -> None:
    """The watch-list stream's events keep what a list page keeps, and an event of an
    unexpected shape is decoded whole."""
    from kube.decode import event_decoder

    for kind in ("Pod", "Node"):
        decode = event_decoder(kind)
        for obj in _objects(kind)[:40]:
            line = orjson.dumps({"type": "ADDED", "object": obj}, default=str)
            slim_event, slim_whole = projection(kind), projection(kind)
            assert slim_event(decode(line)["object"]) == slim_whole(orjson.loads(line)["object"])
    odd = orjson.dumps({"type": "ADDED", "object": {"spec": {"containers": "not a list"}}})
    assert event_decoder("Pod")(odd)["object"]["spec"]["containers"] == "not a list"
    assert event_decoder("ResourceQuota")(b'{"type": "BOOKMARK"}') == {"type": "BOOKMARK"}


def test_neighbouring_pods_of_one_owner_share_its_references_and_no_others_do() -> None:
    """A DaemonSet's pods on every node (neighbours in a list) hold one list of owner
    references; a pod of another owner, or of the same owner with other fields, its own."""

    def made(name: str, *refs: Obj) -> Obj:
        return {"kind": "Pod", "apiVersion": "v1",
                "metadata": {"name": name, "namespace": "gpu-operator",
                             "ownerReferences": [dict(r, uid="u-ds", blockOwnerDeletion=True)
                                                 for r in refs]}}  # fmt: skip

    ds: Obj = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "plugin", "controller": True}

    def slim(pod: Obj) -> Obj:  # decoded, as from a page: every string its own
        return project(orjson.loads(orjson.dumps(pod)))

    project = projection("Pod")
    a, b = slim(made("plugin-a", ds)), slim(made("plugin-b", ds))
    assert a["metadata"]["ownerReferences"] is b["metadata"]["ownerReferences"]
    assert a["metadata"]["ownerReferences"] == [ds]  # uid and blockOwnerDeletion dropped
    other = slim(made("driver-a", ds | {"name": "driver"}))
    adopted = slim(made("plugin-c", ds | {"controller": False}))
    assert other["metadata"]["ownerReferences"] == [ds | {"name": "driver"}]
    assert adopted["metadata"]["ownerReferences"] == [ds | {"controller": False}]
    # A pod of an owner of its own (most of a batch cluster's) holds a list of one, sized
    # for one: the comprehension's room for four cost 16 bytes a pod.
    refs = other["metadata"]["ownerReferences"]
    assert sys.getsizeof(refs) == sys.getsizeof([refs[0]])
    odd = slim(made("odd", ds | {"name": ["not", "a", "name"]}))  # kept, not shared
    assert odd["metadata"]["ownerReferences"] == [ds | {"name": ["not", "a", "name"]}]


def test_events_decode_to_what_the_engine_reads_of_them() -> None:
    """A list of Events (core/v1 and events.k8s.io/v1 shapes, with managedFields and the
    reporting fields the engine does not read) normalises and files exactly as decoded whole."""
    from triage.cluster.events import by_subject, normalise_event

    events = _objects("Event")
    assert len(events) > 20
    noisy = dict(events[0])
    noisy["metadata"] = dict(noisy.get("metadata") or {}, managedFields=[{"manager": "kubelet"}])
    noisy |= {"source": {"component": "kubelet"}, "reportingComponent": "kubelet"}
    noisy["involvedObject"] = dict(
        noisy["involvedObject"], uid="0b0e5f0e-1111-2222-3333-444455556666", apiVersion="v1",
        resourceVersion="4711", fieldPath="spec.containers{main}",
    )  # fmt: skip
    newer = {"kind": "Event", "apiVersion": "events.k8s.io/v1",
             "metadata": {"name": "e1", "namespace": "team-a"},
             "regarding": {"kind": "Pod", "name": "train-0", "namespace": "team-a"},
             "reason": "FailedScheduling", "note": "0/3  nodes are available",
             "type": "Warning", "series": {"count": 4, "lastObservedTime": "2026-01-01T00:00:00Z"},
             "eventTime": "2025-12-31T23:00:00.000000Z"}  # fmt: skip
    page = orjson.dumps({"metadata": {"resourceVersion": "9"}, "items": [*events, noisy, newer]},
                        default=str)  # fmt: skip
    decode = list_decoder("Event")
    assert decode is not None
    typed, whole = decode(page)["items"], orjson.loads(page)["items"]
    assert [normalise_event(e) for e in typed] == [normalise_event(e) for e in whole]
    assert by_subject(typed).keys() == by_subject(whole).keys()
    assert "managedFields" not in typed[-2]["metadata"] and "source" not in typed[-2]
    assert typed[-2]["involvedObject"].keys() == {"kind", "name", "namespace"}
    odd = orjson.dumps({"items": [{**newer, "regarding": "not an object"}]})
    assert decode(odd)["items"][0]["regarding"] == "not an object"  # decoded whole
    # Slimmed as a sweep's cluster-wide list is (`slim_event`), decoded either way: the same.
    for items in (typed, orjson.loads(page)["items"]):
        slim = list(map(projection("Event"), items))
        assert [normalise_event(e) for e in slim] == [normalise_event(e) for e in whole]
        assert by_subject(slim).keys() == by_subject(whole).keys()
        assert "managedFields" not in slim[-2]["metadata"]


def _at(obj: Any, path: str) -> list[Any]:
    """The values at a declared pod field ("spec.containers[].ports"), one per list item."""
    found = [obj]
    for part in path.split("."):
        many = part.endswith("[]")
        key = part.removesuffix("[]")
        found = [x.get(key) for x in found if isinstance(x, dict)]
        if many:
            found = [y for x in found for y in (x or [])]
    return found


def test_the_cache_keeps_every_pod_field_a_scheduler_filter_reads() -> None:
    """Every pod field a filter of the registry declares (`FilterPlugin.pod_fields`) survives
    the watch cache's projection, typed decoding included: a filter reading a field the
    cache drops would judge live clusters differently from snapshots."""
    from triage.layers.scheduling.registry import POD_FIELDS

    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "labels": {"app": "x"}},
        "spec": {
            "nodeName": "n1",
            "nodeSelector": {"pool": "a"},
            "affinity": {
                "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}},
                "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{}]},
                "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{}]},
            },
            "tolerations": [{"key": "gpu", "operator": "Exists"}],
            "topologySpreadConstraints": [{"topologyKey": "zone", "maxSkew": 1}],
            "overhead": {"cpu": "100m"},
            "resourceClaims": [{"name": "gpu", "resourceClaimName": "c"}],
            "volumes": [
                {"name": "data", "persistentVolumeClaim": {"claimName": "d"}},
                {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}},
            ],
            "containers": [{
                "name": "main", "image": "i",
                "ports": [{"containerPort": 80, "hostPort": 8080}],
                "resources": {"limits": {"nvidia.com/gpu": "1"}, "claims": [{"name": "gpu"}]},
            }],
            "initContainers": [{
                "name": "side", "restartPolicy": "Always", "ports": [{"hostPort": 9090}],
                "resources": {"requests": {"cpu": "1"}},
            }],
        },
        "status": {"phase": "Pending"},
    }  # fmt: skip
    page = json.dumps({"metadata": {}, "items": [pod]}).encode()
    decode = list_decoder("Pod")
    assert decode is not None
    kept = projection("Pod", Sharer())(decode(page)["items"][0] | {"kind": "Pod"})
    for path in POD_FIELDS:
        wanted = _at(pod, path)
        assert any(w is not None for w in wanted), f"the test pod lacks {path}"
        assert _at(kept, path) == wanted, f"the cache drops {path}, which a filter reads"


def test_pods_read_for_usage_alone_sum_to_the_same_usage_and_keep_little() -> None:
    """A triage that must know every node's usage reads every running pod for that alone:
    decoded to what usage is worked out from (`usage_decoder`), the pods of every fixture,
    with init containers, sidecars, overhead and finished pods among them, sum to the usage
    the whole pods do, while their conditions, statuses and selectors are left out."""
    from kube.decode import usage_decoder
    from triage.cluster.usage import usage_of

    sidecar = {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}}
    overhead = {"metadata": {"name": "kata", "namespace": "ns"},
                "spec": {"nodeName": "n1", "overhead": {"cpu": "250m", "memory": "160Mi"},
                         "initContainers": [sidecar],
                         "containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]},
                "status": {"phase": "Running"}}  # fmt: skip
    finished = [overhead | {"metadata": {"name": phase.lower(), "namespace": "ns"},
                            "status": {"phase": phase}} for phase in ("Succeeded", "Failed")]  # fmt: skip
    pods = [*_objects("Pod"), overhead, *finished]
    spec_keys = {k for p in pods for k in p.get("spec") or {}}
    assert {"initContainers", "overhead", "affinity"} <= spec_keys
    assert {"Succeeded", "Failed", "Running"} <= {p["status"].get("phase") for p in pods}
    page = orjson.dumps({"metadata": {}, "items": pods}, default=str)
    decoded = usage_decoder()(page)["items"]
    whole = orjson.loads(page)["items"]
    assert usage_of(decoded) == usage_of(whole)
    assert len(usage_of(whole)) > 10
    assert not any("conditions" in (p.get("status") or {}) for p in decoded)
    assert not any("affinity" in (p.get("spec") or {}) for p in decoded)
    assert len(orjson.dumps(decoded)) * 4 < len(page)


@pytest.mark.parametrize("projected", [False, True], ids=["typed", "for-projection"])
def test_a_pod_s_annotations_the_engine_does_not_read_are_never_decoded(projected: bool) -> None:
    """The CNI's annotations (an address, a container ID, a network status of hundreds of
    bytes) are skipped by the decoder; those the engine reads are decoded as they are."""
    read = {"kueue.x-k8s.io/queue-name": "q", "kubernetes.io/limit-ranger": "LimitRanger ..."}
    noise = {
        "cni.projectcalico.org/podIP": "10.0.0.1/32",
        "k8s.v1.cni.cncf.io/network-status": "[]",
    }
    page = orjson.dumps({"items": [{"metadata": {"name": "p", "annotations": noise | read}}]})
    decode = list_decoder("Pod", projected=projected)
    assert decode is not None
    assert decode(page)["items"][0]["metadata"]["annotations"] == read
