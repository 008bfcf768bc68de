"""`gpu-triage verify-node|verify-nodes|preflight` as a user runs them: exit codes and JSON."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.verify.vbuild import build, cpu_node, healthy

EXE = str(Path(sys.executable).with_name("gpu-triage"))


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [EXE, *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": "/usr/bin:/bin", "HOME": "/nonexistent"},
    )


@pytest.fixture(scope="module")
def snap(tmp_path_factory: pytest.TempPathFactory) -> str:
    src = build(healthy("gpu-ok"), healthy("gpu-bad", allocatable=7), cpu_node("cpu-01"))
    items = [
        o
        for kind in ("Namespace", "Node", "Pod", "ClusterPolicy", "RuntimeClass")
        for o in src.objects(kind)
    ]
    path = tmp_path_factory.mktemp("snap") / "cluster.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    return str(path)


def test_passing_node_exits_0_with_a_table(snap: str) -> None:
    r = run("verify-node", "gpu-ok", "--snapshot", snap)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[1].split()[:2] == ["gpu-ok", "pass"]
    assert len(r.stdout.splitlines()) == 2  # a passing node is its line; its checks: -o wide
    wide = run("verify-node", "gpu-ok", "--snapshot", snap, "-o", "wide")
    assert "[pass] gpu-resources" in wide.stdout


def test_failing_node_exits_1_and_json_carries_checks_and_owner(snap: str) -> None:
    r = run("verify-node", "gpu-bad", "--snapshot", snap, "--format", "json")
    assert r.returncode == 1, r.stderr
    data = json.loads(r.stdout)
    assert data["kind"] == "NodeVerification"
    assert data["passed"] is False and data["failing_layer"] == "device-plugin"
    assert data["owner"]["team"] == "k8s-platform"
    check = next(c for c in data["checks"] if c["name"] == "gpu-resources")
    assert (
        check["status"] == "fail"
        and "nvidia.com/gpu: capacity 8, allocatable 7" in check["evidence"]
    )


def test_verify_nodes_all_gpu_nodes_and_selector(snap: str) -> None:
    r = run("verify-nodes", "--snapshot", snap, "--format", "json")
    assert r.returncode == 1
    assert [n["node"] for n in json.loads(r.stdout)["items"]] == ["gpu-bad", "gpu-ok"]
    r = run("verify-nodes", "--snapshot", snap, "--selector", "kubernetes.io/hostname=gpu-ok")
    assert r.returncode == 0, r.stdout + r.stderr
    r = run("verify-nodes", "--snapshot", snap, "-l", "pool=none")
    assert r.returncode == 1 and "nothing verified" in r.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("verify-node", "nope"), "node nope not found"),
        (("verify-node", "Bad_Node"), "invalid node name"),
        (("verify-nodes", "--selector", "a in (b"), "invalid selector 'a in (b': unbalanced '('"),
        (("verify-nodes", "-l", "k=v=w"), "'v=w' is not a label value"),
        (("verify-node", "gpu-ok", "--test-pod"), "--test-pod creates a pod: pass --allow-writes"),
        (
            ("verify-node", "gpu-ok", "--test-pod", "--allow-writes"),
            "--test-pod needs a live cluster",
        ),
    ],
)
def test_errors_exit_2_with_one_line(snap: str, args: tuple[str, ...], message: str) -> None:
    r = run(*args, "--snapshot", snap)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and message in r.stderr and "Traceback" not in r.stderr


def test_preflight_from_a_snapshot(snap: str) -> None:
    r = run("preflight", "--snapshot", snap)
    assert r.returncode == 0, r.stderr
    assert (
        "GPU nodes: 2   other nodes: 1" in r.stdout
        and "permissions: not checked (snapshot)" in r.stdout
    )
    data = json.loads(run("preflight", "--snapshot", snap, "--format", "json").stdout)
    assert (
        data["runtime_versions"] == {"containerd://1.7.22": 2}
        and data["missing_permissions"] is None
    )


def test_preflight_checks_the_bots_access_policy_too(snap: str, tmp_path: Path) -> None:
    """Before the bot is deployed: none (a warning, the bot would refuse everyone), a file that
    does not load (a problem: exit 1), and a good one (what it grants)."""
    none = run("preflight", "--snapshot", snap)
    assert none.returncode == 0 and "warning: Slack bot: no access policy configured" in none.stdout
    bad = tmp_path / "policy.yaml"
    bad.write_text("tenants: [{name: x, namespaces: [Not_A_Namespace]}]\n")
    broken = run("preflight", "--snapshot", snap, "--access-policy", str(bad))
    assert broken.returncode == 1 and "PROBLEMS FOUND" in broken.stdout
    assert f"problem: access policy {bad}: tenants.0.namespaces" in broken.stdout
    good = Path(__file__).parents[2] / "access-policy.example.yaml"
    ok = run("preflight", "--snapshot", snap, "--access-policy", str(good), "--format", "json")
    assert ok.returncode == 0 and not any(
        "access policy" in w for w in json.loads(ok.stdout)["warnings"]
    )
    text = run("preflight", "--snapshot", snap, "--access-policy", str(good)).stdout
    assert "3 operator principal(s), 2 tenant(s) over 3 namespace(s)" in text
