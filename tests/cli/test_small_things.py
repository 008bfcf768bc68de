"""The small things a newcomer trips on, each as the user meets it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_triage.settings import SettingsError, load_settings
from triage.layers.plugin_health import sharing_note

ROOT = Path(__file__).resolve().parents[2]
DEMO = str(ROOT / "gpu_triage/demo/cluster.yaml")
EXE = Path(sys.executable).parent / "gpu-triage"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(EXE), *args], capture_output=True, text=True, timeout=120)


def test_verify_node_on_a_cpu_node_says_it_is_not_a_gpu_node() -> None:
    p = run("verify-node", "k8s-cpu-01", "--snapshot", DEMO)
    assert p.returncode == 1
    assert "k8s-cpu-01 is not a GPU node" in p.stdout
    assert "device-plugin" not in p.stdout and "k8s-platform" not in p.stdout


def test_sharing_strategy_none_is_not_sharing() -> None:
    node = {"metadata": {"name": "g", "labels": {
        "nvidia.com/gpu.replicas": "1", "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/gpu.count": "8"}}}  # fmt: skip
    assert sharing_note(node) is None
    node["metadata"]["labels"].update(
        {"nvidia.com/gpu.replicas": "4", "nvidia.com/gpu.sharing-strategy": "time-slicing"}
    )
    assert "time-slicing with 4 replicas" in (sharing_note(node) or "")


def test_preflight_never_says_ok_beside_a_failing_cluster_policy() -> None:
    p = run("preflight", "--snapshot", str(ROOT / "tests/fixtures/driver-crashloop.yaml"))
    first, *rest = p.stdout.splitlines()
    assert "ClusterPolicy state: notReady" in "\n".join(rest)
    assert first.endswith("PROBLEMS FOUND") and p.returncode == 1


def test_socket_mode_asks_for_no_signing_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SLACK_SIGNING_SECRET", raising=False)
    monkeypatch.setenv("SLACK_BOT_TOKEN", "xoxb-1-2-3")
    monkeypatch.setenv("SLACK_APP_TOKEN", "xapp-1-2-3")
    assert load_settings().signing_secret == ""
    monkeypatch.delenv("SLACK_APP_TOKEN")
    with pytest.raises(SettingsError, match=r"^SLACK_SIGNING_SECRET is not set$"):
        load_settings()


def test_snapshot_of_the_current_folder_names_its_cluster(tmp_path: Path) -> None:
    (tmp_path / "prod-east").mkdir()
    fixture = ROOT / "tests/fixtures/driver-crashloop.yaml"
    (tmp_path / "prod-east/cluster.yaml").write_text(fixture.read_text())
    p = subprocess.run(
        [str(EXE), "pending", "-A", "--snapshot", "."],
        cwd=tmp_path / "prod-east", capture_output=True, text=True, timeout=120,
        env={**os.environ},
    )  # fmt: skip
    assert "(cluster prod-east)" in p.stdout.splitlines()[0]
    assert "drill in: gpu-triage why-pending" in p.stdout and "--snapshot ." in p.stdout
