"""`gpu-triage why-pending` and `gpu-triage demo` as a user runs them: a subprocess, its
stdout, stderr and exit status."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).with_name("gpu-triage")
FIXTURES = Path(__file__).parents[1] / "fixtures"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN), *args], capture_output=True, text=True, timeout=120)


def test_text_report_leads_with_the_verdict() -> None:
    p = run(
        "why-pending",
        "resnet-train-0",
        "-n",
        "team-vision",
        "--snapshot",
        str(FIXTURES / "driver-crashloop.yaml"),
    )
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == "pod team-vision/resnet-train-0 on cluster driver-crashloop"
    assert lines[1].startswith("  BLOCKED at layer driver")
    assert "Owner: gpu-infrastructure (#gpu-infra)" in p.stdout
    assert "Next steps:" in p.stdout and "gpu-a100-01" in p.stdout


def test_json_report_holds_the_contract() -> None:
    p = run(
        "why-pending",
        "pretrain-13b",
        "-n",
        "team-nlp",
        "--snapshot",
        str(FIXTURES / "resourcequota-exceeded.yaml"),
        "--format",
        "json",
    )
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout)
    assert report["failing_layer"] == "quota"
    assert [f["layer"] for f in report["findings"]] == [
        "driver",
        "device-plugin",
        "scheduling",
        "quota",
    ]
    for f in report["findings"]:
        assert set(f) >= {"layer", "status", "summary", "evidence"}
        assert all(isinstance(e, str) for e in f["evidence"])
    assert report["pod"] == {
        "namespace": "team-nlp",
        "name": "pretrain-13b",
        "kind": "Job",
        "pod": None,
        "node": None,
        "phase": None,
        "workload": {"kind": "Job", "name": "pretrain-13b"},
    }
    assert report["owner"]["team"] and report["remediation"]
    assert any("gpu-quota" in e for e in report["findings"][3]["evidence"])
    assert len(report["fingerprint"]) == 16


def test_running_pod_exits_zero_with_null_layer() -> None:
    p = run(
        "why-pending",
        "resnet-serve-0",
        "-n",
        "team-vision",
        "--snapshot",
        str(FIXTURES / "running.yaml"),
        "--format",
        "json",
    )
    assert p.returncode == 0
    assert json.loads(p.stdout)["failing_layer"] is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["why-pending", "Bad_Name", "-n", "team-vision"],
            "invalid pod or workload name 'Bad_Name'",
        ),
        (
            ["why-pending", "nope", "-n", "team-vision"],
            "no pod or workload named nope in namespace team-vision",
        ),
        (["why-pending", "resnet-train-0", "-n", "ghost"], "namespace ghost not found"),
        (["why-pending", "resnet-train-0", "-n", "team.vision"], "invalid namespace 'team.vision'"),
    ],
)
def test_bad_input_is_one_line_on_stderr(args: list[str], message: str) -> None:
    p = run(*args, "--snapshot", str(FIXTURES / "driver-crashloop.yaml"))
    assert p.returncode == 2
    assert p.stdout == ""
    assert p.stderr.count("\n") == 1 and message in p.stderr
    assert "Traceback" not in p.stderr


def test_malformed_snapshot(tmp_path: Path) -> None:
    bad = tmp_path / "cluster.yaml"
    bad.write_text("items: [\n")
    p = run("why-pending", "x", "--snapshot", str(bad))
    assert p.returncode == 2
    assert p.stderr.startswith(f"gpu-triage: error: {bad}: invalid YAML")


def test_unreachable_cluster(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: dead\n"
        "clusters: [{name: dead, cluster: {server: 'http://127.0.0.1:9'}}]\n"
        "contexts: [{name: dead, context: {cluster: dead, user: u, namespace: team-a}}]\n"
        "users: [{name: u, user: {token: t}}]\n"
    )
    p = run("why-pending", "train", "--kubeconfig", str(kubeconfig))
    assert p.returncode == 3  # the cluster, not the input
    assert p.stderr.count("\n") == 1 and "127.0.0.1:9" in p.stderr
    assert "Traceback" not in p.stderr


def test_demo_triages_every_stuck_workload() -> None:
    p = run("demo")
    assert p.returncode == 0, p.stderr
    table = p.stdout.split("=" * 100)[0]
    layers = {line.split()[0]: line.split()[1] for line in table.splitlines()[3:] if line.strip()}
    assert layers["team-vision/resnet-train"] == "driver"
    assert layers["team-speech/asr-train"] == "device-plugin"
    assert layers["team-nlp/pretrain-13b"] == "quota"
    assert {"driver", "device-plugin", "scheduling", "quota"} <= set(layers.values())
    p = run("demo", "--format", "json")
    assert {r["failing_layer"] for r in json.loads(p.stdout)["items"]} >= {
        "driver",
        "device-plugin",
        "scheduling",
        "quota",
    }


def test_live_cluster_through_the_cli_uses_the_context_namespace(tmp_path: Path) -> None:
    """The real client against a loopback API server; no -n: the context's namespace."""
    import yaml

    from kube.testing import TOKEN, FakeApiServer
    from tests.builders import namespace, node, operator_pods, pod

    objs = [
        node("a1", cordoned=True),
        *operator_pods("a1"),
        pod("train"),
        namespace("team-a"),
        namespace("gpu-operator"),
    ]
    with FakeApiServer(objs) as api:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "lab",
            "clusters": [{"name": "lab", "cluster": {"server": api.url}}],
            "users": [{"name": "lab", "user": {"token": TOKEN}}],
            "contexts": [
                {"name": "lab", "context": {"cluster": "lab", "user": "lab", "namespace": "team-a"}}
            ],
        }
        path = tmp_path / "kubeconfig"
        path.write_text(yaml.safe_dump(config))
        p = run("why-pending", "train", "--kubeconfig", str(path), "--format", "json")
    assert p.returncode == 0, p.stderr
    report = json.loads(p.stdout)
    assert report["cluster"] == "lab" and report["pod"]["namespace"] == "team-a"
    assert report["failing_layer"] == "scheduling"
    assert any("cordoned" in e for e in report["findings"][2]["evidence"])
