"""`kubectl gpu-triage …`: the real kubectl finds the plugin on PATH (the `kubectl-gpu_triage`
entry point, or krew's link to the packaged launcher) and runs it; the krew manifest says
where each platform's archive is and what to link."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).parents[2]
QUOTA = str(ROOT / "tests" / "fixtures" / "resourcequota-exceeded.yaml")
sys.path.insert(0, str(ROOT / "deploy" / "krew"))
import package  # noqa: E402

needs_kubectl = pytest.mark.skipif(
    shutil.which("kubectl") is None,
    reason="kubectl is not on PATH (make test installs it through .ci/tools)",
)


def _kubectl(*args: str, path: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": path}
    return subprocess.run(["kubectl", *args], capture_output=True, text=True, timeout=120, env=env)


@needs_kubectl
def test_kubectl_runs_the_installed_entry_point_as_its_plugin() -> None:
    path = f"{Path(sys.executable).parent}:{os.environ['PATH']}"
    p = _kubectl("gpu-triage", "why-pending", "pretrain-13b", "-n", "team-nlp",
                 "--snapshot", QUOTA, "--exit-code", path=path)  # fmt: skip
    assert p.returncode == 1 and "BLOCKED at layer quota" in p.stdout, p.stderr
    usage = _kubectl("gpu-triage", "--help", path=path)
    assert usage.stdout.startswith("usage: kubectl gpu-triage")
    assert "kubectl-gpu_triage" in _kubectl("plugin", "list", path=path).stdout


@needs_kubectl
def test_the_packaged_launcher_works_through_a_link_as_krew_installs_it(tmp_path: Path) -> None:
    """The archive's launcher, linked from another folder: it finds its lib/ beside the real
    file and runs the CLI with the Python it is given."""
    unpacked = tmp_path / "store"
    unpacked.mkdir()
    launcher = unpacked / "kubectl-gpu_triage"
    launcher.write_text(package.LAUNCHER.format(python="3.11"))
    launcher.chmod(0o755)
    (unpacked / "lib").symlink_to(ROOT)  # stands in for the installed project and its deps
    links = tmp_path / "bin"
    links.mkdir()
    (links / "kubectl-gpu_triage").symlink_to(launcher)
    env_path = f"{links}:{os.environ['PATH']}"
    env = {**os.environ, "PATH": env_path, "GPU_TRIAGE_PYTHON": sys.executable}
    p = subprocess.run(
        ["kubectl", "gpu-triage", "why-pending", "pretrain-13b", "-n", "team-nlp", "--snapshot",
         QUOTA, "-o", "yaml"],
        capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert yaml.safe_load(p.stdout)["failing_layer"] == "quota"


def test_the_krew_manifest_names_each_archive_its_digest_and_the_binary(tmp_path: Path) -> None:
    archives = {}
    for platform in ("linux/amd64", "darwin/arm64"):
        archive = tmp_path / f"kubectl-gpu_triage-{platform.replace('/', '_')}.tar.gz"
        archive.write_bytes(platform.encode())
        archives[platform] = archive
    text = package.render(
        archives, base_url="https://example.com/v1/", python="3.11", homepage="https://x.test"
    )
    manifest = yaml.safe_load(text)
    assert manifest["apiVersion"] == "krew.googlecontainertools.github.com/v1alpha2"
    assert manifest["kind"] == "Plugin" and manifest["metadata"]["name"] == "gpu-triage"
    assert manifest["spec"]["version"] == f"v{package.version()}"
    platforms = {
        (p["selector"]["matchLabels"]["os"], p["selector"]["matchLabels"]["arch"]): p
        for p in manifest["spec"]["platforms"]
    }
    assert set(platforms) == {("linux", "amd64"), ("darwin", "arm64")}
    linux = platforms[("linux", "amd64")]
    assert linux["uri"] == "https://example.com/v1/kubectl-gpu_triage-linux_amd64.tar.gz"
    assert linux["sha256"] == hashlib.sha256(b"linux/amd64").hexdigest()
    assert linux["bin"] == "kubectl-gpu_triage"
    assert {f["from"] for f in linux["files"]} == {"kubectl-gpu_triage", "lib"}
