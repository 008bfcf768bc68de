"""The line a command shows on a terminal while it reads a large cluster: what it says, that
it is erased, and that nothing is written where stderr is not a terminal."""

from __future__ import annotations

import io
import json
import os
import pty
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpu_triage.progress import line, showing_reads
from kube.testing import FakeApiServer
from triage.cluster.snapshot import load_objects

BIN = Path(sys.executable).with_name("gpu-triage")
FIXTURES = Path(__file__).parents[1] / "fixtures"


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_the_line_names_the_largest_kinds_and_fits_the_terminal() -> None:
    counts = {"pods": 600_003, "jobs": 565_416, "nodes": 20_000, "namespaces": 41, "leases": 0}
    assert line(counts, 41.4, 200) == (
        "read 1,185,460 objects (pods 600,003, jobs 565,416, nodes 20,000, …) in 41 s"
    )
    assert line({"nodes": 3}, 1.2, 200) == "read 3 objects (nodes 3) in 1 s"
    assert line({}, 0.4, 200) == "read 0 objects in 0 s"
    assert line(counts, 41.4, 20) == "read 1,185,460 objec"  # never wraps


def test_the_reads_so_far_are_rewritten_in_place_then_erased() -> None:
    read = {"pods": 0}
    out = _Terminal()
    with showing_reads(lambda: dict(read), out, after=0, every=0.01):
        for n in (500, 1_000, 1_500):
            read["pods"] = n
            time.sleep(0.05)
    written = out.getvalue()
    shown = [part for part in written.split("\r") if part.strip()]
    assert all(part.startswith("read ") for part in shown)
    assert any("read 1,500 objects (pods 1,500)" in part for part in shown)
    assert written.endswith("\r") and written.split("\r")[-2].strip() == ""  # erased
    assert "\n" not in written  # never a line of its own in what the command prints


def test_nothing_is_written_off_a_terminal_for_a_quick_command_or_without_a_cluster() -> None:
    for stream, counts, after in (
        (io.StringIO(), lambda: {"pods": 1}, 0.0),  # a pipe, a log file
        (_Terminal(), None, 0.0),  # a snapshot: nothing is read from a cluster
        (_Terminal(), lambda: {"pods": 1}, 5.0),  # done before the line would appear
    ):
        with showing_reads(counts, stream, after=after, every=0.01):
            time.sleep(0.05)
        assert stream.getvalue() == ""


def test_pending_on_a_terminal_shows_its_reads_on_stderr_and_prints_the_same(
    tmp_path: Path,
) -> None:
    """`pending -A` against a slow API server, its stderr a terminal (a pty): the reads so far
    on stderr while it runs, erased at the end; stdout as without a terminal."""
    with FakeApiServer(load_objects(FIXTURES / "driver-crashloop.yaml")) as api:
        api.latency = 0.4  # every list takes that: the command runs past the line's delay
        env = {**os.environ, "KUBECONFIG": str(api.write_kubeconfig(tmp_path / "kubeconfig"))}
        cmd = [str(BIN), "pending", "-A", "-o", "json"]
        plain = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120,
                               stdin=subprocess.DEVNULL)  # fmt: skip
        assert plain.returncode == 0 and plain.stderr == "", plain.stderr
        shown, said = _on_terminal(cmd, env)
    assert shown.returncode == 0
    assert _swept(shown.stdout) == _swept(plain.stdout)
    painted = [part for part in said.split("\r") if part.strip()]
    assert painted, said
    assert all(p.startswith("read ") and " objects (" in p for p in painted), said
    assert "nodes " in said and "pods " in said
    assert said.endswith("\r") and "\n" not in said  # erased: the terminal is left clean


@pytest.mark.parametrize(
    ("args", "latency", "status"),
    [
        (("why-pending", "resnet-train-0", "-n", "team-vision"), 0.4, 0),
        (("snapshot", "-A", "{dest}"), 0.1, 0),  # one kind after another
        (("verify-nodes",), 0.3, 1),  # a node's driver crashes in this fixture
        (("preflight",), 0.3, 1),
    ],
    ids=["why-pending", "snapshot", "verify-nodes", "preflight"],
)
def test_the_other_commands_that_read_a_cluster_show_their_reads_too(
    args: tuple[str, ...], latency: float, status: int, tmp_path: Path
) -> None:
    with FakeApiServer(load_objects(FIXTURES / "driver-crashloop.yaml")) as api:
        api.latency = latency
        env = {**os.environ, "KUBECONFIG": str(api.write_kubeconfig(tmp_path / "kubeconfig"))}
        cmd = [str(BIN), *(a.format(dest=tmp_path / "snap") for a in args)]
        done, said = _on_terminal(cmd, env)
    assert done.returncode == status and done.stdout.strip()
    painted = [part for part in said.split("\r") if part.strip()]
    assert painted and all(p.startswith("read ") for p in painted), said
    assert said.endswith("\r") and "\n" not in said


def _swept(out: str) -> dict[str, object]:
    found = json.loads(out)
    assert found["kind"] == "Sweep" and found.pop("generated_at")
    return dict(found)


def _on_terminal(
    cmd: list[str], env: dict[str, str]
) -> tuple[subprocess.CompletedProcess[str], str]:
    """`cmd` run with its stderr a terminal (a pty): what it did, and what it wrote there."""
    master, tty = pty.openpty()
    try:
        done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=tty, text=True, env=env,
                              timeout=120, stdin=subprocess.DEVNULL)  # fmt: skip
        os.close(tty)
        tty = -1
        return done, _drain(master)
    finally:
        if tty >= 0:
            os.close(tty)
        os.close(master)


def _drain(fd: int) -> str:
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: every writer of the pty is gone
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode()


def test_a_warning_logged_meanwhile_gets_a_line_of_its_own() -> None:
    import logging

    out = _Terminal()
    handler = logging.StreamHandler(out)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        with showing_reads(lambda: {"pods": 7}, out, after=0, every=0.01):
            time.sleep(0.05)
            logging.getLogger("kube").warning("429 Too Many Requests: retrying in 1 s")
            time.sleep(0.05)
    finally:
        root.removeHandler(handler)
    written = out.getvalue()
    before, _, after = written.partition("429 Too Many Requests")
    assert before.endswith("\r") and before.rsplit("\r", 2)[-2].strip() == ""  # erased first
    assert after.startswith(": retrying in 1 s\n")
    assert "read 7 objects (pods 7)" in after  # painted again below it
    assert handler.filters == []


def test_a_terminal_that_goes_away_ends_the_line_not_the_command() -> None:
    class _Gone(_Terminal):
        def write(self, text: str) -> int:
            raise OSError(5, "Input/output error")

    with showing_reads(lambda: {"pods": 1}, _Gone(), after=0, every=0.01):
        time.sleep(0.05)  # the painter's writes fail: no traceback, nothing raised here
