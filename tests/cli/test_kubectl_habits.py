"""kubectl's habits in the CLI: names as kubectl takes them, flags before or after the
command, --version, completion scripts and names, label selectors, -o name, --no-headers;
and the quiet default (details with -o wide), one answer per node fault."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from triage import load_snapshot
from triage.label_query import parse_label_selector
from triage.named import parse_target
from triage.names import InvalidNameError

ROOT = Path(__file__).resolve().parents[2]
DEMO = str(ROOT / "gpu_triage/demo/cluster.yaml")
EXE = Path(sys.executable).parent / "gpu-triage"


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(EXE), *args], capture_output=True, text=True, timeout=120,
        env={**os.environ, **(env or {})},
    )  # fmt: skip


@pytest.mark.parametrize(
    ("typed", "kind", "namespace", "name"),
    [
        ("resnet-train-0", None, None, "resnet-train-0"),
        ("team-vision/resnet-train-0", None, "team-vision", "resnet-train-0"),
        ("po/resnet-train-0", "Pod", None, "resnet-train-0"),
        ("sts/resnet-train", "StatefulSet", None, "resnet-train"),
        ("statefulsets.apps/resnet-train", "StatefulSet", None, "resnet-train"),
        ("deploy/detector-serve", "Deployment", None, "detector-serve"),
        ("job/team-nlp/pretrain-13b", "Job", "team-nlp", "pretrain-13b"),
        ("rs/x", "ReplicaSet", None, "x"),
    ],
)
def test_names_as_kubectl_takes_them(typed: str, kind: str, namespace: str, name: str) -> None:
    named = parse_target(typed)
    assert (named.kind, named.namespace, named.name) == (kind, namespace, name)


@pytest.mark.parametrize("typed", ["a/b/c/d", "widget/team/x", "Team/x", "sts/", "/x"])
def test_a_malformed_name_is_one_line(typed: str) -> None:
    with pytest.raises(InvalidNameError):
        parse_target(typed)


def test_every_spelling_reaches_the_same_workload_and_its_incident_key() -> None:
    runs = [
        run("why-pending", "team-vision/resnet-train-0", "--snapshot", DEMO),
        run("why-pending", "sts/resnet-train", "-n", "team-vision", "--snapshot", DEMO),
        run("-n", "team-vision", "--snapshot", DEMO, "why-pending", "po/resnet-train-0", "--debug"),
    ]
    for p in runs:
        assert p.returncode == 0, p.stderr
        assert "BLOCKED at layer driver" in p.stdout
    assert runs[0].stdout.startswith("pod team-vision/resnet-train-0 on cluster demo")
    assert runs[1].stdout.startswith("statefulset team-vision/resnet-train (pod resnet-train-0)")
    clash = run("why-pending", "team-vision/resnet-train-0", "-n", "team-nlp", "--snapshot", DEMO)
    assert clash.returncode == 2 and clash.stderr.count("\n") == 1 and "disagree" in clash.stderr
    wrong_kind = run("why-pending", "job/resnet-train", "-n", "team-vision", "--snapshot", DEMO)
    assert wrong_kind.returncode == 2
    assert (
        wrong_kind.stderr
        == "gpu-triage: error: no Job named resnet-train in namespace team-vision\n"
    )


def test_version_and_completion_scripts() -> None:
    version = run("--version")
    assert version.returncode == 0 and version.stdout.startswith("gpu-triage ")
    for shell, marker in (("bash", "complete "), ("zsh", "compdef"), ("fish", "complete ")):
        script = run("completion", shell)
        assert script.returncode == 0 and marker in script.stdout and "gpu-triage" in script.stdout


def _complete(line: str, tmp_path: Path) -> list[str]:
    out = tmp_path / "completions"
    with out.open("w") as fd8:
        subprocess.run(
            [str(EXE)], pass_fds=(fd8.fileno(),), capture_output=True, timeout=60, check=False,
            env={**os.environ, "_ARGCOMPLETE": "1", "_ARGCOMPLETE_IFS": "\n",
                 "COMP_LINE": line, "COMP_POINT": str(len(line)),
                 "_ARGCOMPLETE_STDOUT_FILENAME": str(out)},
        )  # fmt: skip
    return [w.strip() for w in out.read_text().split("\n") if w.strip()]


def test_completion_names_pods_namespaces_nodes_and_contexts(tmp_path: Path) -> None:
    base = f"gpu-triage why-pending --snapshot {DEMO} "
    assert _complete(base + "-n team-vision res", tmp_path) == ["resnet-train-0"]
    assert "sts/resnet-train" in _complete(base + "-n team-vision sts/", tmp_path)
    assert "team-vision" in _complete(base + "-n team-v", tmp_path)
    nodes = _complete(f"gpu-triage verify-node --snapshot {DEMO} gpu-h", tmp_path)
    assert nodes == ["gpu-h100-01", "gpu-h100-02", "gpu-h100-03"]
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text("contexts: [{name: prod-east}, {name: prod-west}, {name: lab}]\n")
    os.environ["KUBECONFIG"], old = str(kubeconfig), os.environ.get("KUBECONFIG")
    try:
        assert _complete("gpu-triage pending --context prod", tmp_path) == [
            "prod-east",
            "prod-west",
        ]
    finally:
        if old is None:
            del os.environ["KUBECONFIG"]
        else:
            os.environ["KUBECONFIG"] = old


@pytest.mark.parametrize(
    ("selector", "selected"),
    [
        ("nvidia.com/gpu.product=NVIDIA-L4", {"gpu-l4-01", "gpu-l4-02", "gpu-l4-03"}),
        ("nvidia.com/gpu.product==NVIDIA-L4", {"gpu-l4-01", "gpu-l4-02", "gpu-l4-03"}),
        ("nvidia.com/gpu.product in (NVIDIA-L4, NVIDIA-L40S)", {"gpu-l4-01", "gpu-l4-02", "gpu-l4-03", "gpu-l40s-01"}),
        ("nvidia.com/gpu.present,nvidia.com/gpu.product notin (NVIDIA-L4,NVIDIA-A100-SXM4-80GB,NVIDIA-H100-80GB-HBM3)", {"gpu-l40s-01"}),
        ("!nvidia.com/gpu.present", {"k8s-cp-01", "k8s-cpu-01", "k8s-cpu-02", "k8s-cpu-03"}),
    ],
)  # fmt: skip
def test_label_selectors_in_kubectl_s_grammar(selector: str, selected: set[str]) -> None:
    from triage.verify.node import matches

    nodes = load_snapshot(DEMO).objects("Node")
    chosen = {n["metadata"]["name"] for n in nodes if matches(n, parse_label_selector(selector))}
    assert chosen == selected


def test_a_bad_selector_is_one_line() -> None:
    p = run("verify-nodes", "--snapshot", DEMO, "-l", "a in (b")
    assert (
        p.returncode == 2
        and p.stderr == "gpu-triage: error: invalid selector 'a in (b': unbalanced '('\n"
    )


def test_quiet_by_default_details_with_wide() -> None:
    """Passing nodes are one line; a failing node shows only what failed; -o wide all."""
    quiet = run("verify-nodes", "--snapshot", DEMO).stdout.splitlines()
    wide = run("verify-nodes", "--snapshot", DEMO, "-o", "wide").stdout.splitlines()
    assert not [line for line in quiet if line.startswith("== ") and "passed" in line]
    assert not [line for line in quiet if "[pass]" in line or "[skip]" in line]
    assert len(quiet) < 70 < len(wide)
    headless = run("verify-nodes", "--snapshot", DEMO, "--no-headers").stdout.splitlines()
    assert headless[0].split()[0] == "gpu-a100-01"
    demo = run("demo").stdout
    said = [line for line in demo.splitlines() if line.startswith("[warn] device-plugin")]
    assert len(said) > 1 and all(line.endswith("(said above)") for line in said[1:])
    assert demo.count("GPU stack:") == 1


def test_verify_node_and_why_pending_agree_on_a_node_s_layer_and_owner() -> None:
    """gpu-h100-03: its device plugin crashes (and the validator waits behind it)."""
    verified = run("verify-node", "gpu-h100-03", "--snapshot", DEMO).stdout.splitlines()[1].split()
    assert verified[:4] == ["gpu-h100-03", "FAIL", "device-plugin", "k8s-platform"]
    side = run("why-pending", "gh200-bench", "-n", "research", "--snapshot", DEMO).stdout
    assert "[warn] device-plugin: node gpu-h100-03" in side


def test_drill_in_hints_keep_the_flags_that_read_the_same_cluster() -> None:
    out = run("pending", "-A", "--snapshot", DEMO).stdout
    hints = [line.strip() for line in out.splitlines() if "drill in:" in line]
    assert hints and all(h.endswith(f"--snapshot {DEMO}") for h in hints)
