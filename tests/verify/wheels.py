"""The project's wheel as its users get it, and the wheels of its dependencies, for tests.

`build_wheel` does what the image's builder stage and a release do: it copies the build
context as `.dockerignore` filters it (no tests, docs or local state) and runs setuptools'
PEP 517 hook on the copy, offline, so the checkout is never written to (tests run on several
workers at once). `install` puts a wheel and its dependencies into a clean virtualenv with
the test's own pip, from a folder of wheels kept across runs (`.tools/wheels/<python>`): the
first run downloads them from the package index (`pip download`, once, under a lock shared
by the workers), every later run installs offline.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("GPU_TRIAGE_WHEEL_CACHE") or ROOT / ".tools" / "wheels")


def dockerignore() -> list[re.Pattern[str]]:
    """`.dockerignore` as regexes over context-relative paths (Docker's `**`, `*`, `?`)."""
    patterns = []
    for line in (ROOT / ".dockerignore").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        assert not line.startswith("!"), "exceptions are not modelled here"
        regex = re.escape(line.strip("/"))
        regex = regex.replace(r"\*\*/", "(?:.*/)?").replace(r"\*\*", ".*")
        regex = regex.replace(r"\*", "[^/]*").replace(r"\?", "[^/]")
        patterns.append(re.compile(regex + r"\Z"))
    return patterns


def _ignore(patterns: list[re.Pattern[str]]) -> Callable[[str, list[str]], set[str]]:
    def ignore(directory: str, names: list[str]) -> set[str]:
        rel = Path(directory).relative_to(ROOT).as_posix()
        prefix = "" if rel == "." else rel + "/"
        return {n for n in names if any(p.match(prefix + n) for p in patterns)}

    return ignore


def build_wheel(tmp: Path) -> Path:
    """The wheel built from the image's build context (what `pip wheel .` builds there)."""
    context, dist = tmp / "src", tmp / "dist"
    shutil.copytree(ROOT, context, ignore=_ignore(dockerignore()), symlinks=True)
    assert not (context / "tests").exists() and (context / "assist").is_dir()
    hook = "import sys; from setuptools import build_meta as b; print(b.build_wheel(sys.argv[1]))"
    build = subprocess.run(
        [sys.executable, "-c", hook, str(dist)],
        cwd=context, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert build.returncode == 0, build.stderr[-3000:]
    return dist / build.stdout.strip().splitlines()[-1]


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _pip(python: Path, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    """This interpreter's pip acting on `python`'s environment (pip's --python): the venv
    needs no pip of its own."""
    return subprocess.run(
        [sys.executable, "-m", "pip", "--python", str(python), "--disable-pip-version-check",
         *args],
        capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


def venv(python: str, where: Path) -> Path:
    """A clean virtualenv of that interpreter, without pip; its python."""
    subprocess.run([python, "-m", "venv", "--without-pip", str(where)], check=True, timeout=120)
    return where / "bin" / "python"


def install(python: Path, requirement: str, *, tag: str) -> None:
    """`requirement` (a wheel path, with extras if any) and its dependencies into the venv of
    `python`, offline from the cache of this Python's wheels (`tag`: cp312), which is filled
    from the package index the first time it lacks something."""
    cache = CACHE / tag
    offline = ("install", "--no-index", "--find-links", str(cache), requirement)
    done = _pip(python, *offline, timeout=300) if cache.is_dir() else None
    if done is not None and done.returncode == 0:
        return
    with _locked(CACHE / f"{tag}.lock"):
        got = _pip(python, "download", "--only-binary=:all:", "--dest", str(cache),
                   requirement, timeout=600)  # fmt: skip
        assert got.returncode == 0, got.stderr[-3000:]
        for own in cache.glob("gpu_triage-*.whl"):  # the wheel under test is given by path
            own.unlink()
    done = _pip(python, *offline, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


def fetch(requirement: str, *, version: str) -> Path:
    """The cache folder of `version`'s wheels (3.12), holding `requirement` and its
    dependencies for this platform (downloaded the first time they are missing)."""
    cache = CACHE / f"cp{version.replace('.', '')}"
    cmd = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check",
           "--only-binary=:all:", "--python-version", version, "--dest", str(cache)]  # fmt: skip
    offline = [*cmd, "--no-index", "--find-links", str(cache), requirement]
    with _locked(CACHE / f"{cache.name}.lock"):
        if (
            not cache.is_dir()
            or subprocess.run(offline, capture_output=True, timeout=300).returncode
        ):
            got = subprocess.run([*cmd, requirement], capture_output=True, text=True, timeout=600)
            assert got.returncode == 0, got.stderr[-3000:]
        for own in cache.glob("gpu_triage-*.whl"):  # the wheel under test is given by path
            own.unlink()
    return cache
