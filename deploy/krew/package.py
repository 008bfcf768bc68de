"""Build the `kubectl gpu-triage` plugin archives and the krew manifest that installs them.

    python deploy/krew/package.py --base-url https://example.com/releases/v0.1.0 \\
        [--platform linux/amd64 --platform linux/arm64 ...] [--out dist/krew]

Each archive holds a launcher, `kubectl-gpu_triage`, and `lib/` with the project and its
dependencies installed for that platform and Python version (`pip install --target`, binary
wheels only, so it builds for other platforms too). The launcher runs the CLI with the
Python it finds; kubectl finds the launcher on PATH (krew links it into ~/.krew/bin). The
manifest is `gpu-triage.template.yaml` with each archive's URL and sha256 filled in.
"""

from __future__ import annotations

import argparse
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
# krew's os/arch -> pip's platform tags for binary wheels
PIP_PLATFORMS = {
    "linux/amd64": ["manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64"],
    "linux/arm64": ["manylinux2014_aarch64", "manylinux_2_17_aarch64", "manylinux_2_28_aarch64"],
    "darwin/amd64": ["macosx_10_12_x86_64", "macosx_10_13_x86_64", "macosx_11_0_x86_64"],
    "darwin/arm64": ["macosx_11_0_arm64", "macosx_12_0_arm64"],
}
LAUNCHER = """#!/bin/sh
# kubectl gpu-triage: runs the GPU Triage CLI from the lib/ folder beside the real file (krew
# links this one into ~/.krew/bin).
self=$0
while [ -h "$self" ]; do
  link=$(ls -l "$self" | sed 's/.* -> //')
  case $link in /*) self=$link ;; *) self=$(dirname "$self")/$link ;; esac
done
here=$(cd "$(dirname "$self")" && pwd)
python=${{GPU_TRIAGE_PYTHON:-$(command -v python{python} || command -v python3)}}
PYTHONPATH="$here/lib${{PYTHONPATH:+:$PYTHONPATH}}" exec "$python" -m gpu_triage.cli "$@"
"""


def version() -> str:
    import tomllib

    return str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])


def build(platform: str, *, python: str, out: Path) -> Path:
    """The archive for one krew platform (os/arch), written into `out`."""
    with tempfile.TemporaryDirectory() as tmp:
        wheels, lib = Path(tmp) / "wheels", Path(tmp) / "lib"
        pip = [sys.executable, "-m", "pip"]
        # the project's own wheel (pure Python), then it and its dependencies for the target
        subprocess.run([*pip, "wheel", "--quiet", "--no-deps", "-w", str(wheels), str(ROOT)],
                       check=True)  # fmt: skip
        shutil.rmtree(ROOT / "build", ignore_errors=True)  # setuptools' leftovers
        cmd = [*pip, "install", "--quiet", "--target", str(lib), "--only-binary=:all:",
               "--python-version", python, "--implementation", "cp",
               *map(str, wheels.glob("*.whl"))]  # fmt: skip
        for tag in PIP_PLATFORMS[platform]:
            cmd += ["--platform", tag]
        subprocess.run(cmd, check=True)
        archive = out / f"kubectl-gpu_triage-{platform.replace('/', '_')}.tar.gz"
        with tarfile.open(archive, "w:gz") as tar:
            script = LAUNCHER.format(python=python).encode()
            info = tarfile.TarInfo("kubectl-gpu_triage")
            info.size, info.mode = len(script), 0o755
            tar.addfile(info, io.BytesIO(script))
            tar.add(lib, arcname="lib")
            tar.add(ROOT / "README.md", arcname="README.md")
    return archive


def render(archives: dict[str, Path], *, base_url: str, python: str, homepage: str) -> str:
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
        VERSION=version(), HOMEPAGE=homepage, PYTHON=python, PLATFORMS="\n".join(entries)
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True, help="where the archives will be served")
    parser.add_argument("--platform", action="append", choices=sorted(PIP_PLATFORMS))
    parser.add_argument("--python", default="3.11", help="the Python the plugin runs on")
    parser.add_argument("--homepage", default="https://github.com/example/gpu-triage")
    parser.add_argument("--out", type=Path, default=ROOT / "dist" / "krew")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    platforms = args.platform or ["linux/amd64"]
    archives = {p: build(p, python=args.python, out=args.out) for p in platforms}
    manifest = args.out / "gpu-triage.yaml"
    manifest.write_text(
        render(archives, base_url=args.base_url, python=args.python, homepage=args.homepage)
    )
    for path in (*archives.values(), manifest):
        print(path)


if __name__ == "__main__":
    main()
