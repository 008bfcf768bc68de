"""The wheel is the product: what `pipx install` puts on a machine must work from there.

The wheel the project builds is installed into a clean virtualenv outside the checkout, once
per supported Python (3.11, 3.12, 3.13: each one found on this machine), from the index's
binary wheels for that Python, and run from a folder that holds no source:

- installed alone (`pipx install gpu-triage`), it triages a snapshot (`why-pending`, `pending
  -A`) and pulls none of the bot's dependencies; a bot-only command says in one line which
  extra to install;
- with the `bot` extra, `bot --help`, `db upgrade` on a fresh SQLite file and the image's
  self-check run.
"""

from __future__ import annotations

import glob
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.verify.wheels import ROOT, build_wheel, install, venv

FIXTURES = ROOT / "tests" / "fixtures"
SUPPORTED = ("3.11", "3.12", "3.13")
BOT_ONLY = ("slack_bolt", "slack_sdk", "sqlalchemy", "alembic", "psycopg", "waitress",
            "prometheus_client")  # fmt: skip


def interpreter(version: str) -> str | None:
    """A working `python<version>`: this one, one on PATH, or one pyenv installed."""
    if f"{sys.version_info[0]}.{sys.version_info[1]}" == version:
        return sys.executable
    candidates = [shutil.which(f"python{version}") or ""]
    pyenv = os.path.expanduser(f"~/.pyenv/versions/{version}*/bin/python{version}")
    candidates += sorted(glob.glob(pyenv), reverse=True)
    for exe in filter(None, candidates):
        probe = subprocess.run(
            [exe, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        if probe.returncode == 0 and probe.stdout.strip() == version:
            return exe  # a pyenv shim for a version not selected fails the probe
    return None


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("wheel"))


def _run(bin_dir: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """A command of the venv, run as a user would: from elsewhere, no PYTHONPATH, no
    kubeconfig."""
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(cwd), "LANG": "C.UTF-8"}
    return subprocess.run(
        [str(bin_dir / args[0]), *args[1:]],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize("version", SUPPORTED)
def test_the_wheel_installs_and_runs_on_each_supported_python(
    version: str, wheel: Path, tmp_path: Path
) -> None:
    exe = interpreter(version)
    if exe is None:
        pytest.skip(f"no Python {version} on this machine")
    python = venv(exe, tmp_path / "venv")
    bin_dir = python.parent
    run = tmp_path / "elsewhere"
    run.mkdir()
    install(python, str(wheel), tag=f"cp{version.replace('.', '')}")

    # The CLI alone: a triage of a snapshot, a sweep, and none of the bot's packages.
    quota = str(FIXTURES / "resourcequota-exceeded.yaml")
    p = _run(bin_dir, "gpu-triage", "why-pending", "pretrain-13b", "-n", "team-nlp",
             "--snapshot", quota, "-o", "yaml", cwd=run)  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert yaml.safe_load(p.stdout)["failing_layer"] == "quota"
    p = _run(bin_dir, "gpu-triage", "pending", "-A", "--snapshot",
             str(FIXTURES / "fleet-many-causes.yaml"), cwd=run)  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("20 stuck workload(s)")
    assert (bin_dir / "kubectl-gpu_triage").exists()
    probe = "import importlib.util as u, sys; print(' '.join(m for m in sys.argv[1:] if u.find_spec(m)))"
    present = _run(bin_dir, "python", "-c", probe, *BOT_ONLY, cwd=run).stdout.split()
    assert present == [], "the CLI install pulled in the bot's dependencies"

    # Bot-only commands without their extra: one line saying what to install.
    p = _run(bin_dir, "gpu-triage", "bot", cwd=run)
    assert p.returncode == 2 and p.stderr.count("\n") == 1, p.stderr
    assert "pip install 'gpu-triage[bot]'" in p.stderr and "Traceback" not in p.stderr
    for args in (["db", "upgrade"], ["why-pending", "x", "--snapshot", quota, "--record"]):
        p = _run(bin_dir, "gpu-triage", *args, cwd=run)
        assert p.returncode == 2 and "pip install 'gpu-triage[incidents]'" in p.stderr, p.stderr
    assert _run(bin_dir, "gpu-triage", "bot", "--help", cwd=run).returncode == 0

    # With the bot's extra: the bot starts as far as its help, the schema migrates, and the
    # image's self-check finds everything the bot imports.
    install(python, f"{wheel}[bot]", tag=f"cp{version.replace('.', '')}")
    p = _run(bin_dir, "gpu-triage", "bot", "--help", cwd=run)
    assert p.returncode == 0 and p.stdout.startswith("usage: gpu-triage bot"), p.stderr
    db = f"sqlite:///{run / 'incidents.sqlite'}"
    p = _run(bin_dir, "gpu-triage", "db", "upgrade", "--database-url", db, cwd=run)
    assert p.returncode == 0 and "schema upgraded empty -> " in p.stdout, p.stderr
    p = _run(bin_dir, "python", "-m", "gpu_triage.selfcheck", cwd=run)
    assert p.returncode == 0, p.stderr


def test_the_declared_pythons_are_the_tested_ones(wheel: Path) -> None:
    """The classifiers and requires-python say what this test installs on."""
    import zipfile

    with zipfile.ZipFile(wheel) as z:
        meta = z.read(next(n for n in z.namelist() if n.endswith(".dist-info/METADATA")))
    lines = meta.decode().splitlines()
    declared = {ln.rsplit(" :: ", 1)[1] for ln in lines
                if ln.startswith("Classifier: Programming Language :: Python :: 3.")}  # fmt: skip
    assert declared == set(SUPPORTED)
    assert "Requires-Python: >=3.11" in lines
    assert any(ln.startswith("Provides-Extra: bot") for ln in lines)
