"""`kubectl gpu-triage …`: the real kubectl finds the plugin on PATH (the `kubectl-gpu_triage`
entry point, or krew's link to the packaged launcher) and runs it; the krew archive, built
as a release builds it, runs on every supported Python and refuses another in one line; the
krew manifest says where each platform's archive is and what to link."""

from __future__ import annotations

import hashlib
import json
import os
import platform as host
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from kube.testing import FakeApiServer
from tests.verify.test_wheel import interpreter
from tests.verify.wheels import build_wheel, fetch
from triage.cluster.snapshot import load_objects

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
    file and runs the CLI with the Python it is given, under kubectl's name."""
    unpacked = tmp_path / "store"
    (unpacked / "lib").mkdir(parents=True)
    launcher = unpacked / "kubectl-gpu_triage"
    launcher.write_text(package.launcher())
    launcher.chmod(0o755)
    (unpacked / "lib" / "any").symlink_to(ROOT)  # stands in for the project and its deps
    (unpacked / "lib" / f"cp{sys.version_info[0]}{sys.version_info[1]}").mkdir()
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
    usage = subprocess.run(["kubectl", "gpu-triage", "--help"], capture_output=True, text=True,
                           timeout=120, env=env)  # fmt: skip
    assert usage.stdout.startswith("usage: kubectl gpu-triage")


def _krew_archive(tmp: Path) -> Path:
    """The linux/amd64 archive as `package.py` builds it (the CLI wheel and its dependencies
    for every supported Python, from the tests' wheel cache), unpacked."""
    wheel = build_wheel(tmp / "build")
    caches = [str(fetch(str(wheel), version=v)) for v in package.PYTHONS]
    archive = package.build("linux/amd64", out=tmp, find_links=caches, wheel=wheel)
    unpacked = tmp / "unpacked"
    with tarfile.open(archive) as tar:
        tar.extractall(unpacked, filter="data")
    return unpacked


@pytest.mark.skipif(
    host.system() != "Linux" or host.machine() != "x86_64",
    reason="builds the linux/amd64 archive, and runs it",
)
def test_the_krew_archive_runs_on_every_supported_python_and_refuses_others(
    tmp_path: Path,
) -> None:
    """One archive (built once: it takes a while): what is the same for every Python is
    stored once, the compiled packages per Python, the bot's packages not at all; its
    launcher runs the CLI on each supported Python found here, against a snapshot and a live
    cluster (a fake API server on loopback); on Python 3.10, or none, it says in one line
    which Pythons it needs."""
    unpacked = _krew_archive(tmp_path)
    lib = unpacked / "lib"
    assert {p.name for p in lib.iterdir()} == {"any", "cp311", "cp312", "cp313"}
    assert (lib / "any" / "gpu_triage" / "cli.py").is_file()
    assert (lib / "any" / "kubernetes").is_dir()
    assert not (lib / "any" / "kubernetes" / "aio").exists()
    for tag in ("cp311", "cp312", "cp313"):
        assert list((lib / tag / "pydantic_core").glob(f"_pydantic_core.cpython-{tag[2:]}*.so"))
    everything = {p.name.split("-")[0].lower() for d in lib.iterdir() for p in d.iterdir()}
    assert not everything & {"slack_bolt", "slack_sdk", "sqlalchemy", "alembic", "psycopg"}

    launcher = str(unpacked / "kubectl-gpu_triage")
    ran = 0
    with FakeApiServer(load_objects(ROOT / "tests" / "fixtures" / "driver-crashloop.yaml")) as api:
        kubeconfig = str(api.write_kubeconfig(tmp_path / "kubeconfig"))
        for version in package.PYTHONS:
            exe = interpreter(version)
            if exe is None:
                continue
            env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "GPU_TRIAGE_PYTHON": exe}
            p = subprocess.run([launcher, "why-pending", "pretrain-13b", "-n", "team-nlp",
                                "--snapshot", QUOTA, "-o", "json"], capture_output=True,
                               text=True, timeout=120, env=env, cwd=tmp_path)  # fmt: skip
            assert p.returncode == 0, (version, p.stderr)
            assert json.loads(p.stdout)["failing_layer"] == "quota"
            p = subprocess.run([launcher, "pending", "-A", "--kubeconfig", kubeconfig],
                               capture_output=True, text=True, timeout=120, env=env,
                               cwd=tmp_path)  # fmt: skip
            assert p.returncode == 0, (version, p.stderr)
            assert "driver: " in p.stdout and "(cluster fake)" in p.stdout
            ran += 1
    assert ran >= 1

    old = interpreter("3.10") or "/nonexistent/python3.10"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "GPU_TRIAGE_PYTHON": old}
    p = subprocess.run([launcher, "pending", "-A"], capture_output=True, text=True, timeout=60,
                       env=env)  # fmt: skip
    assert p.returncode == 2 and p.stdout == ""
    [line] = p.stderr.splitlines()
    assert line.startswith("kubectl gpu-triage: error: needs Python 3.11, 3.12, 3.13 on PATH")
    assert line.endswith("found: none" if old.startswith("/nonexistent") else "(cp310)")


def test_the_krew_manifest_names_each_archive_its_digest_and_the_binary(tmp_path: Path) -> None:
    archives = {}
    for platform in ("linux/amd64", "darwin/arm64"):
        archive = tmp_path / f"kubectl-gpu_triage-{platform.replace('/', '_')}.tar.gz"
        archive.write_bytes(platform.encode())
        archives[platform] = archive
    text = package.render(archives, base_url="https://example.com/v1/", homepage="https://x.test")
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
