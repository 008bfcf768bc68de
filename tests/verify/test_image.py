"""The image installs the wheel the project builds, and that wheel holds what the bot loads.

There is no Docker engine here, so the test does what the Dockerfile's builder stage does
with the same inputs: it copies the build context as `.dockerignore` filters it, builds the
wheel from it (setuptools' PEP 517 hook, offline) and runs the image's smoke test,
`python -m gpu_triage.selfcheck`, against the unpacked wheel alone: no source tree and no
editable install on the path, only the wheel and the third-party packages. The image once
shipped without `assist/`, which the bot imports at start; the second test removes a package
from the wheel and expects the check to name it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from tests.verify.wheels import ROOT, build_wheel


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from the image's build context (what `pip wheel .` builds there)."""
    return build_wheel(tmp_path_factory.mktemp("image"))


def _unpack(wheel: Path, into: Path) -> Path:
    with zipfile.ZipFile(wheel) as z:
        z.extractall(into)
    return into


def _selfcheck(site: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """The image's smoke test with only `site` (the wheel) and the third-party packages
    importable: `-S` skips the .pth files, the editable install of this checkout among them."""
    cwd.mkdir(exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": os.pathsep.join([str(site), sysconfig.get_paths()["purelib"]]),
        "HOME": str(cwd),
    }
    return subprocess.run(
        [sys.executable, "-S", "-m", "gpu_triage.selfcheck"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_wheel_holds_everything_the_bot_loads_at_start(wheel: Path, tmp_path: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    assert "assist/ask.py" in names and "migrations/versions/0001_initial_schema.py" in names
    done = _selfcheck(_unpack(wheel, tmp_path / "site"), tmp_path / "run")
    assert done.returncode == 0, done.stderr
    assert "is complete" in done.stdout


def test_a_package_the_bot_imports_missing_from_the_wheel_fails_the_check(
    wheel: Path, tmp_path: Path
) -> None:
    site = _unpack(wheel, tmp_path / "site")
    shutil.rmtree(site / "assist")  # what the image got from a hand-kept list of folders
    (top,) = site.glob("*.dist-info/top_level.txt")
    top.write_text("".join(f"{n}\n" for n in top.read_text().split() if n != "assist"))
    done = _selfcheck(site, tmp_path / "run")
    assert done.returncode == 1
    assert re.search(
        r"selfcheck: error: assist\S* \(imported by \S+\) is not installed", done.stderr
    )


def test_the_dockerfile_installs_that_wheel_and_smoke_tests_it_outside_the_sources() -> None:
    lines = [ln.strip() for ln in (ROOT / "Dockerfile").read_text().splitlines()]
    stages = [i for i, ln in enumerate(lines) if ln.startswith("FROM")]
    builder = lines[stages[0] : stages[1]]
    assert [ln for ln in builder if ln.startswith("COPY")] == ["COPY . ."]  # nothing hand-listed
    text = "\n".join(builder)
    assert "pip wheel --no-deps --wheel-dir /dist ." in text
    assert '/opt/venv/bin/pip install "$(echo /dist/*.whl)[bot]"' in text  # with the bot
    smoke = text.index("python -m gpu_triage.selfcheck")
    assert text.rindex("WORKDIR /\n", 0, smoke) > text.rindex("WORKDIR /src", 0, smoke)
    assert "gpu-triage bot --help" in text[text.rindex("WORKDIR /\n", 0, smoke) :]
