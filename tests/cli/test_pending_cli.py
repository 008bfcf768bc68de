"""`gpu-triage pending` as a user runs it: every stuck workload grouped by root cause."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from kube.testing import FakeApiServer
from triage.cluster.snapshot import load_objects

BIN = Path(sys.executable).with_name("gpu-triage")
SNAPSHOT = str(Path(__file__).parents[1] / "fixtures" / "fleet-many-causes.yaml")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(BIN), *args], capture_output=True, text=True, timeout=120)


def test_all_namespaces_text_leads_with_the_totals_and_the_largest_cause() -> None:
    p = run("pending", "-A", "--snapshot", SNAPSHOT)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0].startswith("20 stuck workload(s), 38 GPU(s) waiting, 6 cause(s)")
    assert lines[2].startswith(
        "1. driver: NVIDIA driver pods failing: pool gpu-triage.io/node-pool=a100"
    )
    assert "2 node(s): gpu-a100-01, gpu-a100-02" in lines[2]
    assert "owner gpu-infrastructure (#gpu-infra)" in lines[3]
    assert "drill in: gpu-triage why-pending" in p.stdout


def test_a_namespace_scope_shows_only_its_workloads() -> None:
    p = run("pending", "-n", "team-nlp", "--snapshot", SNAPSHOT, "-o", "json")
    assert p.returncode == 0, p.stderr
    data = json.loads(p.stdout)
    members = {m["namespace"] for g in data["groups"] for m in g["members"]}
    assert members == {"team-nlp"}
    codes = {g["code"] for g in data["groups"]}
    assert codes == {"scheduling.insufficient", "quota.resourcequota-exceeded"}


def test_yaml_output_parses_and_holds_the_groups() -> None:
    p = run("pending", "--all-namespaces", "--snapshot", SNAPSHOT, "--output", "yaml")
    data = yaml.safe_load(p.stdout)
    assert [g["gpus"] for g in data["groups"]] == sorted(
        (g["gpus"] for g in data["groups"]), reverse=True
    )


def test_namespace_and_all_namespaces_exclude_each_other() -> None:
    p = run("pending", "-A", "-n", "x", "--snapshot", SNAPSHOT)
    assert p.returncode == 2 and "not allowed with" in p.stderr and "Traceback" not in p.stderr


def test_an_empty_scope_says_nothing_is_stuck() -> None:
    p = run("pending", "-n", "kube-system", "--snapshot", SNAPSHOT)
    assert p.returncode == 0
    assert "0 stuck workload(s)" in p.stdout and "nothing stuck" in p.stdout


@pytest.mark.parametrize(
    ("args", "env", "deadline"),
    [
        (("-A",), None, 600.0),
        (("-n", "team-a"), None, 120.0),
        (("-A", "--timeout", "45"), None, 45.0),
        (("-A",), "90", 90.0),
    ],
)
def test_a_sweep_of_every_namespace_has_minutes_unless_told_otherwise(
    args: tuple[str, ...], env: str | None, deadline: float,
    deadlines: Callable[[], list[float | None]], tmp_path: Path,
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:  # fmt: skip
    """`pending -A` lists every pod and Job: 1,200 pages of each at 20,000 nodes, two minutes
    of round trips at 100 ms a page, where the 120 s of a triage of a pod's pool would end
    it. --timeout and GPU_TRIAGE_TIMEOUT still decide when given."""
    from gpu_triage.cli import main

    if env is not None:
        monkeypatch.setenv("GPU_TRIAGE_TIMEOUT", env)
    with FakeApiServer(load_objects(Path(SNAPSHOT))) as api:
        kubeconfig = str(api.write_kubeconfig(tmp_path / "kubeconfig"))
        code = main(["pending", *args, "--kubeconfig", kubeconfig, "-o", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert deadlines() == [deadline]
    assert json.loads(out)["kind"] == "Sweep"
