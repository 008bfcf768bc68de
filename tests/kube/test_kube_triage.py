"""Triage through the warm cache gives the same report as through a snapshot of full objects.

The cache keeps slim projections; if the engine starts reading a field `kube.slim` drops,
these reports diverge and this test says so.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from kube.cache import CachedSource
from kube.client import RawClient, load_client
from kube.testing import FakeApiServer
from tests.builders import event, node, pod
from tests.kube.test_kube_cache import wait_for
from triage import load_playbook, triage
from triage.cluster.memory import MemorySource
from triage.cluster.objects import template_labels

NOW = datetime(2025, 1, 1, 1, 0, tzinfo=UTC)
# What Calico and Multus write on a pod they gave an address: never read, never cached.
CNI = {
    "cni.projectcalico.org/containerID": "3f1c9a" * 10 + "beef",
    "cni.projectcalico.org/podIP": "10.244.3.17/32",
    "cni.projectcalico.org/podIPs": "10.244.3.17/32",
    "k8s.v1.cni.cncf.io/network-status": '[{"name": "k8s-pod-network", "ips": ["10.244.3.17"]}]',
}
JOB_UID = "6f1d2c3b-0a9e-4e5f-8c7d-112233445566"


def cluster() -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = [
        {"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "team-a"}},
        {"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "gpu-operator"}},
        {
            "kind": "ResourceQuota",
            "apiVersion": "v1",
            "metadata": {"name": "gpu", "namespace": "team-a"},
            "spec": {"hard": {"requests.nvidia.com/gpu": "4"}},
            "status": {
                "hard": {"requests.nvidia.com/gpu": "4"},
                "used": {"requests.nvidia.com/gpu": "4"},
            },
        },
    ]
    for i in range(3):
        n = node(f"n{i}", gpus=8)
        n["metadata"]["labels"]["nvidia.com/gpu.product"] = "A100"
        n["metadata"]["managedFields"] = [{"manager": "kubelet"}]
        n["status"]["images"] = [{"names": ["x"], "sizeBytes": 1}]
        objs.append(n)
    broken = node("n3", gpus=8)
    del broken["status"]["capacity"]["nvidia.com/gpu"]
    del broken["status"]["allocatable"]["nvidia.com/gpu"]
    objs.append(broken)
    for i in range(3):
        busy = pod(f"busy-{i}", node_name=f"n{i}", gpus=8, phase="Running", selector={})
        # A Job's pod as its controller labels it, and as its CNI annotates it.
        busy["metadata"]["labels"] = {
            "batch.kubernetes.io/controller-uid": JOB_UID, "batch.kubernetes.io/job-name": "busy",
            "controller-uid": JOB_UID, "job-name": "busy",
        }  # fmt: skip
        busy["metadata"]["ownerReferences"] = [
            {"apiVersion": "batch/v1", "kind": "Job", "name": "busy", "uid": JOB_UID,
             "controller": True, "blockOwnerDeletion": True},
        ]  # fmt: skip
        busy["metadata"]["annotations"] = dict(CNI)
        objs.append(busy)
    big = pod("big", gpus=16, phase="Pending", selector={})
    wrong = pod("wrong", gpus=1, phase="Pending", selector={})
    wrong["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": "H100"}
    small = pod("small", gpus=1, phase="Pending", selector={})
    # Annotations the engine reads, among others it does not: a GPU a LimitRange default gave
    # the pod, and a Volcano gang whose PodGroup does not exist.
    injected = pod("injected", gpus=1, phase="Pending", selector={})
    injected["metadata"]["annotations"] = CNI | {
        "kubernetes.io/limit-ranger": "LimitRanger plugin set: nvidia.com/gpu request for "
        "container main; nvidia.com/gpu limit for container main"
    }
    gang = pod("gang", gpus=1, phase="Pending", selector={})
    gang["metadata"]["annotations"] = CNI | {"scheduling.k8s.io/group-name": "gang-pg"}
    for p in (big, wrong, small, injected, gang):
        p["spec"]["containers"][0]["env"] = [{"name": "A", "value": "b"}]
        p["status"]["conditions"] = [
            {
                "type": "PodScheduled",
                "status": "False",
                "reason": "Unschedulable",
                "message": "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.",
            }
        ]
        objs.append(p)
    objs.append(
        event(event_name="big.1", ns="team-a", kind="Pod", name="big", reason="FailedScheduling")
    )
    objs.append(_held_job())
    return objs


HELD_UID = "0b5e7a21-3c4d-4e6f-9a8b-665544332211"


def _held_job() -> dict[str, Any]:
    """A Job that has made no pod yet, whose pods must share a node with the Job's other pods:
    the scheduler lets the first one through because it matches its own term, by the labels
    the Job controller put in its template. It asks for no GPU: every GPU of this cluster is
    taken, and the look-ahead would stop there."""
    own = {"batch.kubernetes.io/controller-uid": HELD_UID, "batch.kubernetes.io/job-name": "held",
           "controller-uid": HELD_UID, "job-name": "held"}  # fmt: skip
    template = pod("x", gpus=0, phase="Pending", selector={})["spec"]
    template["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"batch.kubernetes.io/job-name": "held"}},
         "topologyKey": "kubernetes.io/hostname"}]}}  # fmt: skip
    return {
        "kind": "Job", "apiVersion": "batch/v1",
        "metadata": {"name": "held", "namespace": "team-a", "uid": HELD_UID,
                     "creationTimestamp": "2025-01-01T00:30:00Z"},
        "spec": {"backoffLimit": 6, "completions": 1, "parallelism": 1, "suspend": False,
                 "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": HELD_UID}},
                 "template": {"metadata": {"labels": {"app": "train", **own}},
                              "spec": template}},
        "status": {"active": 0, "ready": 0, "terminating": 0},
    }  # fmt: skip


@pytest.fixture
def cache(api: FakeApiServer, kubeconfig: str) -> Iterator[CachedSource]:
    for obj in cluster():
        api.apply(json.loads(json.dumps(obj)))
    client_api, name = load_client(kubeconfig=kubeconfig)
    src = CachedSource(RawClient(client_api, cluster_name=name), freeze_gc=False)
    assert src.start().wait_synced(10)
    yield src
    src.close()


@pytest.mark.parametrize("name", ["big", "wrong", "small", "busy-0", "injected", "gang", "held"])
def test_cache_and_snapshot_reports_agree(cache: CachedSource, name: str) -> None:
    playbook = load_playbook()
    snapshot = MemorySource(cluster(), cluster_name="fake")
    want = triage(snapshot, namespace="team-a", name=name, playbook=playbook, now=NOW)
    got = triage(cache, namespace="team-a", name=name, playbook=playbook, now=NOW)
    assert got.model_dump(mode="json") == want.model_dump(mode="json")
    if name not in ("busy-0", "held"):
        assert want.failing_layer is not None
    # What the cache keeps of a pod's annotations is what these findings come from.
    said = {"injected": "pod annotation kubernetes.io/limit-ranger: nvidia.com/gpu request",
            "gang": "Volcano PodGroup gang-pg does not exist"}.get(name)  # fmt: skip
    assert said is None or said in want.model_dump_json()
    if name == "held":  # its pod would match its own affinity term: no node is refused for it
        assert "4 of 4 node(s) matching the pod can take it now" in want.model_dump_json()


def test_a_job_a_watch_adds_reads_back_its_template_labels(
    api: FakeApiServer, cache: CachedSource
) -> None:
    # Two more of the held Job's kind, added after the first sync: kept with its spec (the
    # labels naming each left out), each read back with its own.
    added = []
    for i, uid in enumerate(("1d9e", "2e8f")):
        made = copy.deepcopy(_held_job())
        made["metadata"] |= {"name": f"held-{i}", "uid": HELD_UID[:-4] + uid}
        made["spec"]["template"]["metadata"]["labels"] |= {
            "batch.kubernetes.io/controller-uid": made["metadata"]["uid"],
            "controller-uid": made["metadata"]["uid"],
            "batch.kubernetes.io/job-name": f"held-{i}", "job-name": f"held-{i}",
        }  # fmt: skip
        api.apply(made)
        added.append(made)
    wait_for(lambda: all(cache.get("Job", j["metadata"]["name"], namespace="team-a")
                         for j in added))  # fmt: skip
    kept = [cache.get("Job", j["metadata"]["name"], namespace="team-a") for j in added]
    for j, k in zip(added, kept, strict=True):
        assert k is not None
        assert template_labels(k) == j["spec"]["template"]["metadata"]["labels"]
    assert kept[0] is not None and kept[1] is not None
    assert kept[0]["spec"] is kept[1]["spec"]
