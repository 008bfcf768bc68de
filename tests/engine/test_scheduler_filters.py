"""The scheduler's filters past the node (issue 19): volumes, topology spread, pod
(anti-)affinity and host ports, judged from objects, through the CLI. Variants of the bundled
scenarios are written as snapshots the way kubectl prints them, changed in one place."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

FIXTURES = Path(__file__).parents[1] / "fixtures"
BIN = Path(sys.executable).with_name("gpu-triage")
CASES = {c["file"]: c for c in yaml.safe_load((FIXTURES / "expected.yaml").read_text())}
Obj = dict[str, Any]


def run(snapshot: Path, ns: str, name: str, *, fmt: str = "text") -> str:
    p = subprocess.run(
        [str(BIN), "why-pending", name, "-n", ns, "--snapshot", str(snapshot), "--format", fmt],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0 and not p.stderr, p.stderr
    return p.stdout


def case(file: str) -> tuple[str, str]:
    c = CASES[file]
    return c["namespace"], c["name"]


def scheduling(out: str) -> Obj:
    report = json.loads(out)
    return next(f for f in report["findings"] if f["layer"] == "scheduling") | {
        "headline": report["headline"],
        "failing_layer": report["failing_layer"],
        "remediation": report["remediation"],
        "owner": report["owner"],
    }


def variant(tmp_path: Path, file: str, change: Callable[[list[Obj]], None]) -> Path:
    doc = yaml.safe_load((FIXTURES / file).read_text())
    items = copy.deepcopy(doc["items"])
    change(items)
    out = tmp_path / file
    out.write_text(yaml.safe_dump({**doc, "items": items}, sort_keys=True))
    return out


def find(items: list[Obj], kind: str, name: str) -> Obj:
    return next(o for o in items if o["kind"] == kind and o["metadata"]["name"] == name)


def pending_pod(items: list[Obj], name: str) -> Obj:
    return find(items, "Pod", name)


def say(items: list[Obj], pod: Obj, message: str) -> None:
    """Set what the scheduler last said about `pod` (condition and event)."""
    pod["status"]["conditions"][0]["message"] = message
    for o in items:
        if o["kind"] == "Event" and o["involvedObject"]["name"] == pod["metadata"]["name"]:
            o["message"] = message


@pytest.mark.parametrize("file", sorted(f for f in CASES if CASES[f]["note"]))
def test_no_report_carries_an_unfilled_placeholder(file: str) -> None:
    ns, name = case(file)
    out = run(FIXTURES / file, ns, name)
    assert not re.search(r"\{[a-z_]+\}", out), out


def test_a_volume_pinned_to_the_full_zone_names_claim_volume_zone_and_the_free_node() -> None:
    ns, name = case("volume-zone-conflict.yaml")
    f = scheduling(run(FIXTURES / "volume-zone-conflict.yaml", ns, name, fmt="json"))
    assert f["codes"][0] == "scheduling.volume-node-affinity"
    assert "checkpoints-vla-finetune-0" in f["summary"] and "us-east-1a" in f["summary"]
    assert any("gpu-a100-02 (us-east-1b)" in e for e in f["evidence"])
    assert any("gpu-a100-01: 8/8 nvidia.com/gpu allocated" in e for e in f["evidence"])
    assert "snapshot the volume" in f["remediation"][0]


def test_a_claim_that_never_binds_stops_the_pod_whatever_the_gpus() -> None:
    ns, name = case("pvc-unbound.yaml")
    out = run(FIXTURES / "pvc-unbound.yaml", ns, name, fmt="json")
    f = scheduling(out)
    assert f["codes"] == ["scheduling.pvc-unbound"]
    assert "corpus-shared" in f["summary"] and "no StorageClass" in f["summary"]
    assert any("FailedBinding" in e for e in f["evidence"])
    assert "can take it now" not in out  # the free L4 node does not contradict it


def test_a_missing_claim_is_named(tmp_path: Path) -> None:
    ns, name = case("pvc-unbound.yaml")

    def drop_claim(items: list[Obj]) -> None:
        items.remove(find(items, "PersistentVolumeClaim", "corpus-shared"))
        say(items, pending_pod(items, name), '0/7 nodes are available: persistentvolumeclaim "corpus-shared" not found. preemption: 0/7 nodes are available: 7 Preemption is not helpful for scheduling.')  # fmt: skip

    f = scheduling(run(variant(tmp_path, "pvc-unbound.yaml", drop_claim), ns, name, fmt="json"))
    assert f["codes"] == ["scheduling.pvc-missing"]
    assert "PersistentVolumeClaim corpus-shared does not exist" in f["summary"]
    assert "kubectl -n research get pvc" in " ".join(f["remediation"])


def test_a_local_volume_on_another_node_leaves_the_free_node_without_one(tmp_path: Path) -> None:
    ns, name = case("pvc-unbound.yaml")

    def local(items: list[Obj]) -> None:
        pvc = find(items, "PersistentVolumeClaim", "corpus-shared")
        pvc["spec"]["storageClassName"] = "local-nvme"
        pvc["spec"]["accessModes"] = ["ReadWriteOnce"]
        items.append({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                      "metadata": {"name": "local-nvme", "uid": "u-sc", "resourceVersion": "1"},
                      "provisioner": "kubernetes.io/no-provisioner", "reclaimPolicy": "Delete",
                      "volumeBindingMode": "WaitForFirstConsumer"})  # fmt: skip
        items.append({"apiVersion": "v1", "kind": "PersistentVolume",
                      "metadata": {"name": "local-pv-gpu-a100-01-nvme0", "uid": "u-pv"},
                      "spec": {"accessModes": ["ReadWriteOnce"], "capacity": {"storage": "6Ti"},
                               "local": {"path": "/mnt/nvme0"},
                               "nodeAffinity": {"required": {"nodeSelectorTerms": [{
                                   "matchExpressions": [{"key": "kubernetes.io/hostname",
                                                         "operator": "In",
                                                         "values": ["gpu-a100-01"]}]}]}},
                               "persistentVolumeReclaimPolicy": "Retain",
                               "storageClassName": "local-nvme", "volumeMode": "Filesystem"},
                      "status": {"phase": "Available"}})  # fmt: skip
        say(items, pending_pod(items, name), "0/7 nodes are available: 1 node(s) didn't find available persistent volumes to bind, 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, 5 node(s) didn't match Pod's node affinity/selector. preemption: 0/7 nodes are available: 7 Preemption is not helpful for scheduling.")  # fmt: skip

    f = scheduling(run(variant(tmp_path, "pvc-unbound.yaml", local), ns, name, fmt="json"))
    assert f["codes"][0] == "scheduling.volume-unavailable"
    assert any(
        "gpu-l4-01" in e and "no Available PersistentVolume of StorageClass local-nvme" in e
        for e in f["evidence"]
    )


def test_the_csi_attach_limit_comes_before_the_volume_s_zone(tmp_path: Path) -> None:
    ns, name = case("volume-zone-conflict.yaml")

    def limit(items: list[Obj]) -> None:
        node = find(items, "Node", "gpu-a100-02")
        items.append({"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
                      "metadata": {"name": "gpu-a100-02", "uid": "u-csi"},
                      "spec": {"drivers": [{"allocatable": {"count": 1}, "name": "ebs.csi.aws.com",
                                            "nodeID": "i-0abc", "topologyKeys": [
                                                "topology.kubernetes.io/zone"]}]}})  # fmt: skip
        items.append({"apiVersion": "v1", "kind": "PersistentVolume",
                      "metadata": {"name": "pvc-cache", "uid": "u-pv2"},
                      "spec": {"csi": {"driver": "ebs.csi.aws.com", "volumeHandle": "vol-0cache"},
                               "storageClassName": "gp3"},
                      "status": {"phase": "Bound"}})  # fmt: skip
        items.append({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                      "metadata": {"name": "cache", "namespace": "team-vision", "uid": "u-c"},
                      "spec": {"volumeName": "pvc-cache", "storageClassName": "gp3"},
                      "status": {"phase": "Bound"}})  # fmt: skip
        items.append({"apiVersion": "v1", "kind": "Pod",
                      "metadata": {"name": "feature-cache-0", "namespace": "team-vision", "uid": "u-p"},
                      "spec": {"nodeName": node["metadata"]["name"], "containers": [{"name": "c", "image": "redis:7"}],
                               "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "cache"}}]},
                      "status": {"phase": "Running"}})  # fmt: skip

    f = scheduling(run(variant(tmp_path, "volume-zone-conflict.yaml", limit), ns, name, fmt="json"))
    assert f["codes"][0] == "scheduling.volume-limit"
    assert any("gpu-a100-02: 1/1 ebs.csi.aws.com volumes attached" in e for e in f["evidence"])
    assert f["owner"]["team"] == "k8s-platform"


def test_the_spread_names_the_crowded_and_the_empty_zone() -> None:
    ns, name = case("topology-spread-zone.yaml")
    f = scheduling(run(FIXTURES / "topology-spread-zone.yaml", ns, name, fmt="json"))
    assert f["codes"][:2] == ["scheduling.topology-spread", "scheduling.insufficient"]
    assert "us-east-1b holds 0" in f["summary"] and "maxSkew 1" in f["summary"]
    assert any("gpu-a100-01: topology.kubernetes.io/zone=us-east-1a holds 1" in e for e in f["evidence"])  # fmt: skip


def test_a_node_without_the_topology_label_is_said_to_lack_it(tmp_path: Path) -> None:
    ns, name = case("topology-spread-zone.yaml")

    def unlabel(items: list[Obj]) -> None:
        del find(items, "Node", "gpu-a100-01")["metadata"]["labels"]["topology.kubernetes.io/zone"]

    f = scheduling(
        run(variant(tmp_path, "topology-spread-zone.yaml", unlabel), ns, name, fmt="json")
    )
    assert f["codes"][0] == "scheduling.topology-spread-label"
    assert "lack the label topology.kubernetes.io/zone" in f["summary"]


def test_a_taken_host_port_names_the_pod_holding_it() -> None:
    ns, name = case("host-port-taken.yaml")
    f = scheduling(run(FIXTURES / "host-port-taken.yaml", ns, name, fmt="json"))
    assert f["codes"] == ["scheduling.node-ports"]
    assert "host port TCP/8000" in f["summary"]
    assert any(e.startswith("node gpu-l4-01: host port TCP/8000 is taken by team-nlp/llm-gateway-") for e in f["evidence"])  # fmt: skip


def test_a_host_port_held_in_another_namespace_is_not_named_to_the_tenant(tmp_path: Path) -> None:
    ns, name = case("host-port-taken.yaml")

    def move(items: list[Obj]) -> None:
        holder = next(
            o for o in items
            if o["kind"] == "Pod" and o["spec"].get("nodeName") == "gpu-l4-01"
            and o["metadata"]["name"].startswith("llm-gateway-")
        )  # fmt: skip
        holder["metadata"]["namespace"] = "research"

    f = scheduling(run(variant(tmp_path, "host-port-taken.yaml", move), ns, name, fmt="json"))
    assert any("taken by a pod in another namespace" in e for e in f["evidence"])
    assert not any("research/" in e for e in f["evidence"])
    assert any("research/llm-gateway-" in d for d in f["detail"])


def test_anti_affinity_rules_out_every_node_with_room() -> None:
    ns, name = case("anti-affinity-spread.yaml")
    f = scheduling(run(FIXTURES / "anti-affinity-spread.yaml", ns, name, fmt="json"))
    assert f["codes"] == ["scheduling.pod-anti-affinity"]
    assert "kubernetes.io/hostname" in f["summary"] and "app=vllm-70b" in f["summary"]
    assert "preferredDuringScheduling" in " ".join(f["remediation"])


def test_running_pods_anti_affinity_is_found_when_the_scheduler_reports_it(tmp_path: Path) -> None:
    ns, name = case("anti-affinity-spread.yaml")

    def existing(items: list[Obj]) -> None:
        me = pending_pod(items, name)
        del me["spec"]["affinity"]
        say(items, me, "0/8 nodes are available: 1 node(s) had untolerated taint {node-role.kubernetes.io/control-plane: }, 2 node(s) didn't satisfy existing pods anti-affinity rules, 5 node(s) didn't match Pod's node affinity/selector. preemption: 0/8 nodes are available: 2 No preemption victims found for incoming pod, 6 Preemption is not helpful for scheduling.")  # fmt: skip

    f = scheduling(run(variant(tmp_path, "anti-affinity-spread.yaml", existing), ns, name, fmt="json"))  # fmt: skip
    assert f["codes"] == ["scheduling.existing-anti-affinity"]
    assert {e.split(":")[0] for e in f["evidence"][1:]} == {"node gpu-h100-01", "node gpu-h100-02"}


def test_pod_affinity_to_a_pod_that_runs_where_there_is_no_room(tmp_path: Path) -> None:
    ns, name = case("anti-affinity-spread.yaml")

    def affinity(items: list[Obj]) -> None:
        me = pending_pod(items, name)
        me["spec"]["affinity"] = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": {"matchLabels": {"app": "feature-store"}},
             "topologyKey": "topology.kubernetes.io/zone"}]}}  # fmt: skip
        me["spec"]["nodeSelector"] = {}
        items.append({"apiVersion": "v1", "kind": "Pod",
                      "metadata": {"name": "feature-store-0", "namespace": ns, "uid": "u-fs",
                                   "labels": {"app": "feature-store"}},
                      "spec": {"nodeName": "k8s-cpu-01", "containers": [{"name": "c", "image": "redis:7"}]},
                      "status": {"phase": "Running"}})  # fmt: skip
        cpu_zone = find(items, "Node", "k8s-cpu-01")["metadata"]["labels"]["topology.kubernetes.io/zone"]  # fmt: skip
        for n in items:
            if n["kind"] == "Node" and n["metadata"]["name"].startswith("gpu-"):
                n["metadata"]["labels"]["topology.kubernetes.io/zone"] = cpu_zone + "-other"

    f = scheduling(run(variant(tmp_path, "anti-affinity-spread.yaml", affinity), ns, name, fmt="json"))  # fmt: skip
    assert f["codes"][0] == "scheduling.pod-affinity"
    assert "app=feature-store" in f["summary"]
