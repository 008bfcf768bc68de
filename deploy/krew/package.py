"""Build the `kubectl gpu-triage` plugin archives and the krew manifest that installs them.

    python deploy/krew/package.py --base-url https://example.com/releases/v0.1.0 \\
        [--platform linux/amd64 --platform linux/arm64 ...] [--out dist/krew]

Each archive holds a launcher, `kubectl-gpu_triage`, and `lib/` with the CLI and its
dependencies (not the bot's: those are the `bot` extra) for that platform, for every Python
in PYTHONS: `pip install --target` once per Python (binary wheels only, so it builds for
other platforms too), then what is the same for all of them (the pure-Python packages, most
of the size) goes into `lib/any/` once and the rest (compiled extensions: pydantic-core,
orjson, msgspec, yaml-rs, aiohttp's parts) into `lib/cp311/`, `lib/cp312/`, ... The launcher
runs the CLI with the first Python on PATH that has a folder here (GPU_TRIAGE_PYTHON names
one), or says in one line which Pythons it needs. kubectl finds the launcher on PATH (krew
links it into ~/.krew/bin). The manifest is `gpu-triage.template.yaml` with each archive's
URL and sha256 filled in.
"""

from __future__ import annotations

import argparse
import filecmp
import hashlib
import io
import shutil
import string
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = Path(__file__).with_name("gpu-triage.template.yaml")
# The Pythons the plugin runs on: those the package declares (pyproject's classifiers).
PYTHONS = ("3.11", "3.12", "3.13")
# krew's os/arch -> pip's platform tags for binary wheels
PIP_PLATFORMS = {
    "linux/amd64": ["manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64"],
    "linux/arm64": ["manylinux2014_aarch64", "manylinux_2_17_aarch64", "manylinux_2_28_aarch64"],
    "darwin/amd64": ["macosx_10_12_x86_64", "macosx_10_13_x86_64", "macosx_11_0_x86_64"],
    "darwin/arm64": ["macosx_11_0_arm64", "macosx_12_0_arm64"],
}
# Installed but never imported by the CLI: the kubernetes client's asyncio twin of itself
# (`kubernetes.aio`, 42 MB of the 76 MB package; the synchronous client never imports it) and
# the client's own tests. tests/cli/test_kubectl_plugin.py runs the pruned archive against a
# fake API server on every Python it supports.
PRUNE = ("kubernetes/aio", "kubernetes/**/*_test.py")
LAUNCHER = """#!/bin/sh
# kubectl gpu-triage: runs the GPU Triage CLI from the lib/ folder beside the real file (krew
# links this one into ~/.krew/bin), with the first Python that has a folder in lib/.
self=$0
while [ -h "$self" ]; do
  link=$(ls -l "$self" | sed 's/.* -> //')
  case $link in /*) self=$link ;; *) self=$(dirname "$self")/$link ;; esac
done
here=$(cd "$(dirname "$self")" && pwd)
found=""
for python in ${{GPU_TRIAGE_PYTHON:-{candidates}}}; do
  command -v "$python" >/dev/null 2>&1 || continue
  tag=$("$python" -c 'import sys; print("cp%d%d" % sys.version_info[:2])' 2>/dev/null) || continue
  if [ -d "$here/lib/$tag" ]; then
    PYTHONPATH="$here/lib/$tag:$here/lib/any${{PYTHONPATH:+:$PYTHONPATH}}" exec "$python" -s -c \\
      'import sys; sys.argv[0] = "kubectl-gpu_triage"; from gpu_triage.cli import main; sys.exit(main())' "$@"
  fi
  found="$found $python ($tag)"
done
echo "kubectl gpu-triage: error: needs Python {versions} on PATH (or GPU_TRIAGE_PYTHON naming one); found:${{found:- none}}" >&2
exit 2
"""


def launcher(pythons: tuple[str, ...] = PYTHONS) -> str:
    """The launcher script for these Python versions (newest first on PATH)."""
    newest = sorted(pythons, key=lambda v: tuple(map(int, v.split("."))), reverse=True)
    return LAUNCHER.format(
        candidates=" ".join([*(f"python{v}" for v in newest), "python3"]),
        versions=", ".join(sorted(pythons, key=lambda v: tuple(map(int, v.split("."))))),
    )


def version() -> str:
    import tomllib

    return str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])


def _install(wheel: Path, *, platform: str, python: str, into: Path, find_links: list[str]) -> None:
    """The CLI wheel and its dependencies for one platform and Python, as files."""
    cmd = [sys.executable, "-m", "pip", "install", "--quiet", "--target", str(into),
           "--only-binary=:all:", "--no-compile", "--python-version", python,
           "--implementation", "cp", str(wheel)]  # fmt: skip
    for tag in PIP_PLATFORMS[platform]:
        cmd += ["--platform", tag]
    for links in find_links:
        cmd += ["--no-index", "--find-links", links]
    subprocess.run(cmd, check=True)
    shutil.rmtree(into / "bin", ignore_errors=True)  # console scripts naming this build's Python
    for unused in PRUNE:
        for path in into.glob(unused):
            shutil.rmtree(path) if path.is_dir() else path.unlink()


def _same(a: Path, b: Path) -> bool:
    """Whether two installed entries (a package folder or a file) hold the same bytes."""
    if a.is_file() or b.is_file():
        return a.is_file() and b.is_file() and filecmp.cmp(a, b, shallow=False)
    cmp = filecmp.dircmp(a, b)
    if cmp.left_only or cmp.right_only or cmp.funny_files:
        return False
    _, mismatch, errors = filecmp.cmpfiles(a, b, cmp.common_files, shallow=False)
    return not mismatch and not errors and all(_same(a / d, b / d) for d in cmp.common_dirs)


def split(per_python: dict[str, Path], lib: Path) -> None:
    """`lib/any/` for what every Python's install holds alike, `lib/cpXY/` for the rest."""
    first = next(iter(per_python.values()))
    shared = {
        entry.name
        for entry in first.iterdir()
        if all(_same(entry, d / entry.name) for d in per_python.values())
    }
    for python, tree in per_python.items():
        tag = "cp" + python.replace(".", "")
        (lib / tag).mkdir(parents=True)
        for entry in tree.iterdir():
            target = lib / ("any" if entry.name in shared else tag) / entry.name
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.move(str(entry), target)


def build(
    platform: str,
    *,
    out: Path,
    pythons: tuple[str, ...] = PYTHONS,
    find_links: list[str] | None = None,
    wheel: Path | None = None,
) -> Path:
    """The archive for one krew platform (os/arch), written into `out`. `find_links`:
    folders of wheels to install from instead of the package index; `wheel`: the project's
    wheel, when already built."""
    with tempfile.TemporaryDirectory() as tmp:
        wheels, lib = Path(tmp) / "wheels", Path(tmp) / "lib"
        if wheel is None:  # the project's own wheel (pure Python)
            subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "-w",
                            str(wheels), str(ROOT)], check=True)  # fmt: skip
            shutil.rmtree(ROOT / "build", ignore_errors=True)  # setuptools' leftovers
            (wheel,) = wheels.glob("*.whl")
        per_python = {}
        for python in pythons:
            per_python[python] = Path(tmp) / f"site-{python}"
            _install(wheel, platform=platform, python=python, into=per_python[python],
                     find_links=find_links or [])  # fmt: skip
        split(per_python, lib)
        archive = out / f"kubectl-gpu_triage-{platform.replace('/', '_')}.tar.gz"
        with tarfile.open(archive, "w:gz") as tar:
            script = launcher(pythons).encode()
            info = tarfile.TarInfo("kubectl-gpu_triage")
            info.size, info.mode = len(script), 0o755
            tar.addfile(info, io.BytesIO(script))
            tar.add(lib, arcname="lib")
            tar.add(ROOT / "README.md", arcname="README.md")
    return archive


def render(archives: dict[str, Path], *, base_url: str, homepage: str) -> str:
    """The krew manifest for these archives (platform -> file served under `base_url`)."""
    entries = []
    for platform, archive in sorted(archives.items()):
        os_name, arch = platform.split("/")
        digest = hashlib.sha256(archive.read_bytes()).hexdigest()
        entries.append(
            f"  - selector:\n      matchLabels:\n        os: {os_name}\n        arch: {arch}\n"
            f"    uri: {base_url.rstrip('/')}/{archive.name}\n    sha256: {digest}\n"
            f"    files:\n      - from: kubectl-gpu_triage\n        to: .\n"
            f"      - from: lib\n        to: lib\n"
            f"    bin: kubectl-gpu_triage"
        )
    return string.Template(TEMPLATE.read_text()).substitute(
        VERSION=version(),
        HOMEPAGE=homepage,
        PYTHONS=", ".join(PYTHONS),
        PLATFORMS="\n".join(entries),
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True, help="where the archives will be served")
    parser.add_argument("--platform", action="append", choices=sorted(PIP_PLATFORMS))
    parser.add_argument("--homepage", default="https://github.com/example/gpu-triage")
    parser.add_argument("--out", type=Path, default=ROOT / "dist" / "krew")
    parser.add_argument(
        "--find-links", action="append", metavar="DIR",
        help="install from this folder of wheels instead of the package index (repeatable)",
    )  # fmt: skip
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    platforms = args.platform or ["linux/amd64"]
    archives = {p: build(p, out=args.out, find_links=args.find_links) for p in platforms}
    manifest = args.out / "gpu-triage.yaml"
    manifest.write_text(render(archives, base_url=args.base_url, homepage=args.homepage))
    for path in (*archives.values(), manifest):
        print(path)


if __name__ == "__main__":
    main()
