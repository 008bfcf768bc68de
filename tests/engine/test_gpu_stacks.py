"""The engine judges each node by the GPU stack it really runs (issue 13): the operator in any
namespace, GKE's and the clouds' own components, plugin-only installs, components switched
off by label. NodeVerdict layers are covered by test_fixtures; these tests hold what a user reads:
where the stack was found, what the evidence names, and advice that fits the stack."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from triage import EngineConfig, TriageReport, load_snapshot, triage
from triage.model import Status
from triage.playbooks import PlaybookError, load_playbook
from triage.vendors.nvidia import DRA, GKE, OPERATOR, PLUGIN, classify

FIXTURES = Path(__file__).parents[1] / "fixtures"
BIN = Path(sys.executable).with_name("gpu-triage")


def report(file: str, ns: str, name: str, **config: str) -> TriageReport:
    return triage(
        load_snapshot(FIXTURES / file),
        namespace=ns,
        name=name,
        config=EngineConfig(**config),  # type: ignore[arg-type]
    )


def advice(r: TriageReport) -> str:
    return "\n".join([*r.operator_steps, *r.remediation, *r.verification])


def test_operator_found_outside_its_default_namespace() -> None:
    r = report("operator-other-namespace.yaml", "team-vision", "resnet-train-0")
    assert r.failing_layer is not None and r.failing_layer.value == "scheduling"
    assert r.gpu_stack[0] == (
        "NVIDIA GPU Operator in namespace nvidia-gpu-operator "
        "(found by ClusterPolicy cluster-policy status.namespace)"
    )
    driver = next(f for f in r.findings if f.layer.value == "driver")
    assert driver.status == Status.OK


def test_operator_namespace_override_is_reported_as_such() -> None:
    r = report(
        "operator-other-namespace.yaml",
        "team-vision",
        "resnet-train-0",
        operator_namespace="nvidia-gpu-operator",
    )
    assert "nvidia-gpu-operator" in r.gpu_stack[0] and "override" in r.gpu_stack[0]


def preflight(file: str) -> str:
    p = subprocess.run(
        [str(BIN), "preflight", "--snapshot", str(FIXTURES / file)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in p.stderr
    return p.stdout


def test_preflight_says_where_and_how_the_operator_was_found() -> None:
    assert (
        "GPU Operator in namespace nvidia-gpu-operator (exists, found by ClusterPolicy "
        "cluster-policy status.namespace)" in preflight("operator-other-namespace.yaml")
    )


def test_preflight_on_a_cluster_without_the_operator_names_the_stacks() -> None:
    out = preflight("gke-device-plugin-crash.yaml")
    assert "GPU Operator: not found" in out
    assert "GPU stack: GKE-managed GPU driver and device plugin: " in out
    assert "RuntimeClass" not in out  # GKE uses none; not a problem to report


def test_gke_installer_crash_is_the_driver_with_gke_advice() -> None:
    r = report("gke-driver-installer-crash.yaml", "team-vision", "whisper-serve-0")
    fail = next(f for f in r.findings if f.status == Status.FAIL)
    assert any("GKE driver installer pod" in e for e in fail.evidence)
    text = advice(r)
    assert re.search(r"kubectl -n kube-system logs nvidia-driver-installer-\w+", text)
    # the pod's name is for operators; tenants get the stack-neutral steps
    assert not any("nvidia-driver-installer-" in s for s in r.remediation)
    assert "gpu-operator" not in text and "clusterpolic" not in text.lower()


def test_plugin_only_nodes_never_ask_for_driver_pods() -> None:
    for file, name in (("helm-plugin-full.yaml", "detr-train-0"),
                       ("eks-device-plugin-crash.yaml", "detr-train-0")):  # fmt: skip
        r = report(file, "team-vision", name)
        driver = next(f for f in r.findings if f.layer.value == "driver")
        assert driver.status == Status.OK, (file, driver)
        assert "driver pod" not in r.headline


def test_eks_plugin_crash_points_at_its_pod_in_kube_system() -> None:
    r = report("eks-device-plugin-crash.yaml", "team-vision", "detr-train-0")
    assert r.failing_layer is not None and r.failing_layer.value == "device-plugin"
    assert re.search(r"kubectl -n kube-system logs nvidia-device-plugin-daemonset-\w+", advice(r))
    assert "NVIDIA device plugin: kube-system/nvidia-device-plugin-daemonset" in r.gpu_stack


def test_no_plugin_installed_says_to_install_one() -> None:
    r = report("eks-no-device-plugin.yaml", "team-vision", "detr-train-0")
    assert "none is installed" in r.headline
    assert "nvidia-device-plugin" in r.remediation[0]


def test_plugin_daemonset_that_skips_the_node_is_named_with_the_taint() -> None:
    r = report("aks-plugin-untolerated.yaml", "team-vision", "detr-train-0")
    fail = next(f for f in r.findings if f.status == Status.FAIL)
    assert any(
        "DaemonSet gpu-resources/nvidia-device-plugin-daemonset skips it" in e
        and "sku=gpu:NoSchedule" in e
        for e in fail.evidence
    )
    assert "skips gpu-a100-01" in r.remediation[0]


def test_component_switched_off_by_label_names_the_label_and_how_to_undo_it() -> None:
    r = report("deploy-label-off.yaml", "team-vision", "detr-train-0")
    assert "switched off" in r.headline
    fail = next(f for f in r.findings if f.status == Status.FAIL)
    assert any("nvidia.com/gpu.deploy.device-plugin=false" in e for e in fail.evidence)
    assert (
        "kubectl label node gpu-a100-01 nvidia.com/gpu.deploy.device-plugin=true --overwrite"
        in r.remediation
    )
    assert not any("logs" in s and "device-plugin" in s for s in r.remediation)
    # A plugin switched off on purpose is not the validator contradicting the pods.
    driver = next(f for f in r.findings if f.layer.value == "driver")
    assert driver.status == Status.OK, driver


def test_the_only_mig_node_full_is_scheduling_not_a_plugin_failure() -> None:
    r = report("mig-only-node-full.yaml", "research", "notebook-1g-0")
    assert r.failing_layer is not None and r.failing_layer.value == "scheduling"
    plugin = next(f for f in r.findings if f.layer.value == "device-plugin")
    assert plugin.status == Status.OK


@pytest.mark.parametrize(
    ("name", "labels", "images", "owners", "expected"),
    [
        ("nvidia-driver-daemonset", {"app": "nvidia-driver-daemonset"}, [], ["ClusterPolicy"],
         (OPERATOR, "driver")),
        ("nvidia-gpu-driver-ubuntu22.04-7f9c", {"app.kubernetes.io/component": "nvidia-driver"},
         [], ["NVIDIADriver"], (OPERATOR, "driver")),
        ("nvidia-device-plugin-daemonset", {"name": "nvidia-device-plugin-ds"}, [], [],
         (PLUGIN, "device-plugin")),
        ("nvdp-nvidia-device-plugin", {"app.kubernetes.io/name": "nvidia-device-plugin"}, [], [],
         (PLUGIN, "device-plugin")),
        ("nvdp-nvidia-device-plugin-gpu-feature-discovery",
         {"app.kubernetes.io/name": "nvidia-device-plugin"}, [], [], (PLUGIN, "gfd")),
        ("nvidia-gpu-device-plugin-large-cos", {"k8s-app": "nvidia-gpu-device-plugin"}, [], [],
         (GKE, "device-plugin")),
        ("nvidia-driver-installer", {"k8s-app": "nvidia-driver-installer"}, [], [],
         (GKE, "driver")),
        ("nvidia-dra-driver-gpu-kubelet-plugin",
         {"app.kubernetes.io/name": "nvidia-dra-driver-gpu",
          "nvidia-dra-driver-gpu-component": "kubelet-plugin"}, [], [], (DRA, "dra-plugin")),
        ("nvidia-dcgm-exporter", {"app": "nvidia-dcgm-exporter"}, [], ["ClusterPolicy"],
         (OPERATOR, "dcgm-exporter")),
        ("kube-proxy", {"k8s-app": "kube-proxy"}, ["registry.k8s.io/kube-proxy:v1.31.4"], [],
         None),
    ],
)  # fmt: skip
def test_components_are_recognised_by_what_each_install_writes(
    name: str,
    labels: dict[str, str],
    images: list[str],
    owners: list[str],
    expected: tuple[str, str] | None,
) -> None:
    assert classify(name=name, labels_=labels, owners=owners, images=images) == expected


def test_no_report_shows_an_unfilled_placeholder() -> None:
    import yaml

    cases = yaml.safe_load((FIXTURES / "expected.yaml").read_text())
    for case in cases:
        r = report(case["file"], case["namespace"], case["name"])
        leftover = [s for s in advice(r).splitlines() if re.search(r"\{[a-z_]+\}|<[a-z_]+>", s)]
        assert not leftover, (case["file"], leftover)


def test_a_playbook_with_an_unknown_placeholder_fails_at_load(tmp_path: Path) -> None:
    text = (Path(__file__).parents[2] / "playbooks" / "default.yaml").read_text()
    bad = tmp_path / "playbook.yaml"
    bad.write_text(text.replace("logs {component_pod}", "logs {componnet_pod}", 1))
    with pytest.raises(PlaybookError, match=r"unknown placeholder \{componnet_pod\}"):
        load_playbook(bad)
