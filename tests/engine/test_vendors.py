"""Accelerators beyond NVIDIA: each vendor's nodes, components and failures are recognised,
each report names the vendor it is about, and nothing says NVIDIA about another vendor's
problem (wording, owner routes, steps), in the fleet view too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.builders import node
from triage import load_snapshot, triage
from triage.fleet import sweep
from triage.layers.stacks.components import pod_component
from triage.model import TriageReport
from triage.vendors import NVIDIA, node_vendor, vendor_of

FIXTURES = Path(__file__).parents[1] / "fixtures"
CASES = [
    c for c in yaml.safe_load((FIXTURES / "expected.yaml").read_text())
    if c["file"].startswith(("amd-", "gaudi-", "intel-", "neuron-", "tpu-", "dra-other"))
    or (c["file"].startswith("mixed-amd") and c["name"].startswith("rocm"))
]  # fmt: skip


def said(r: TriageReport) -> str:
    """What the report says about its cause: headline, the failing layer, steps, owner."""
    parts = [r.headline, *r.remediation, *r.operator_steps, *r.verification]
    for f in r.findings:
        if f.layer == r.failing_layer:  # kube-scheduler's own words quote every taint
            parts += [f.summary, *(e for e in f.evidence if not e.startswith("scheduler ("))]
    return "\n".join(parts)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c['file']}:{c['name']}")
def test_no_other_vendors_problem_is_told_as_nvidias(case: dict[str, Any]) -> None:
    report = triage(load_snapshot(FIXTURES / case["file"]), namespace=case["namespace"],
                    name=case["name"])  # fmt: skip
    text = said(report)
    assert "NVIDIA" not in text and "nvidia.com" not in text, text


@pytest.mark.parametrize(
    ("file", "ns", "name", "words"),
    [
        ("amd-driver-failing.yaml", "team-vision", "mixtral-sft-0",
         ["the AMD driver pod is failing", "lsmod | grep amdgpu", "nodemodulesconfig"]),
        ("amd-plugin-crashloop.yaml", "research", "md-surrogate-0",
         ["advertise no AMD GPUs to kubelet", "/sys/class/kfd"]),
        ("neuron-plugin-crash.yaml", "team-vision", "bert-serve-0",
         ["advertise no AWS Neuron devices to kubelet", "advertises no AWS Neuron devices",
          "/run/infa-map.json"]),
        ("gaudi-plugin-missing.yaml", "team-nlp", "llama-finetune-0",
         ["habanalabs-device-plugin-daemonset", "intel.feature.node.kubernetes.io/gaudi"]),
        ("tpu-slice-topology.yaml", "research", "llama-70b-4x4-0",
         ["no Google TPU node has the label(s)", "No TPU node pool has the accelerator and topology"]),
    ],
)  # fmt: skip
def test_each_vendor_gets_its_own_words_and_steps(
    file: str, ns: str, name: str, words: list[str]
) -> None:
    report = triage(load_snapshot(FIXTURES / file), namespace=ns, name=name)
    text = said(report)
    for word in words:
        assert word in text, (word, text)


def test_a_pod_asking_amd_gpus_is_never_placed_on_free_nvidia_nodes() -> None:
    src = load_snapshot(FIXTURES / "mixed-amd-nvidia-pool.yaml")
    report = triage(src, namespace="team-vision", name="rocm-bench-0", nodes=True)
    assert report.nodes is not None
    usable = [n.name for n in report.nodes if n.usable]
    assert usable == [], usable
    a100 = [n for n in report.nodes if n.name.startswith("gpu-a100")]
    assert a100 and all(not n.eligible for n in a100)


def test_the_fleet_view_names_each_groups_vendor() -> None:
    amd = sweep(load_snapshot(FIXTURES / "amd-driver-failing.yaml"))
    driver = next(g for g in amd.groups if g.code == "driver.pod-failing")
    assert driver.cause.startswith("AMD driver pods failing"), driver.cause
    mixed = sweep(load_snapshot(FIXTURES / "mixed-amd-nvidia-pool.yaml"))
    titles = {g.cause.split(":")[0] for g in mixed.groups if g.code == "driver.pod-failing"}
    assert titles == {"NVIDIA driver pods failing"}  # the NVIDIA pool's own crash


@pytest.mark.parametrize(
    ("labels", "capacity", "vendor"),
    [
        ({"feature.node.kubernetes.io/amd-gpu": "true"}, {}, "AMD"),
        ({"feature.node.kubernetes.io/pci-1002.present": "true"}, {}, "AMD"),
        ({}, {"amd.com/gpu": "8"}, "AMD"),
        ({"feature.node.kubernetes.io/pci-1da3.present": "true"}, {}, "Intel Gaudi"),
        ({"intel.feature.node.kubernetes.io/gpu": "true"}, {}, "Intel"),
        ({"node.kubernetes.io/instance-type": "trn1.32xlarge"}, {}, "AWS Neuron"),
        ({"cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-podslice"}, {}, "Google TPU"),
        ({"nvidia.com/gpu.present": "true"}, {}, "NVIDIA"),
        ({"node.kubernetes.io/instance-type": "m6i.2xlarge"}, {}, None),
    ],
)
def test_a_node_is_known_by_its_vendors_labels_before_any_plugin_ran(
    labels: dict[str, str], capacity: dict[str, str], vendor: str | None
) -> None:
    n = node("n1", product=None, gpus=0)
    n["metadata"]["labels"] = {"kubernetes.io/hostname": "n1", **labels}
    n["status"]["capacity"] = {"cpu": "8", **capacity}
    found = node_vendor(n)
    assert (found.name if found else None) == vendor


def test_components_are_told_apart_by_vendor_not_by_a_shared_image_name() -> None:
    def pod(pod_name: str, image: str, **labels: str) -> dict[str, Any]:
        return {"metadata": {"name": pod_name, "labels": labels},
                "spec": {"containers": [{"name": "c", "image": image}]}}  # fmt: skip

    assert pod_component(pod("amdgpu-device-plugin-daemonset-x1", "rocm/k8s-device-plugin:1.31",
                             name="amdgpu-dp-ds")) == ("rocm-device-plugin", "device-plugin")  # fmt: skip
    assert pod_component(pod("ds-x1", "nvcr.io/nvidia/k8s-device-plugin:v0.17.0")) == (
        "device-plugin", "device-plugin")  # fmt: skip
    example = pod("dra-example-driver-kubeletplugin-x1",
                  "registry.k8s.io/dra-example-driver/dra-example-driver:v0.2.0")  # fmt: skip
    assert pod_component(example) is None  # not NVIDIA's DRA driver
    assert vendor_of("aws.amazon.com/neuroncore") is not None
    assert vendor_of("vpc.amazonaws.com/efa") is None  # a NIC, not an accelerator
    assert vendor_of("nvidia.com/gpu") is NVIDIA
