"""The CLI against an API server with faults, as a user meets them: what could not be read is
said, in the answer and the exit status, and never judged as an empty list; the client
retries what a well-kept client retries; whatever fails ends in one line on stderr."""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme

from kube.testing import FakeApiServer
from triage.cluster.snapshot import load_objects

BIN = Path(sys.executable).with_name("gpu-triage")
FIXTURES = Path(__file__).parents[1] / "fixtures"
POD = ("resnet-train-0", "-n", "team-vision")  # blocked by a crashing driver in this fixture


@pytest.fixture
def api() -> Iterator[FakeApiServer]:
    with FakeApiServer(load_objects(FIXTURES / "driver-crashloop.yaml")) as server:
        yield server


@pytest.fixture
def kubeconfig(api: FakeApiServer, tmp_path: Path) -> str:
    return str(api.write_kubeconfig(tmp_path / "kubeconfig"))


def gpu_triage(*args: str, kubeconfig: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "KUBECONFIG": kubeconfig}
    return subprocess.run(
        [str(BIN), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        stdin=subprocess.DEVNULL,
    )


def one_line(p: subprocess.CompletedProcess[str]) -> str:
    """The error a failed command printed: exactly one line, no traceback, no log noise."""
    lines = p.stderr.splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("gpu-triage: error: "), p.stderr
    return lines[0]


def as_json(p: subprocess.CompletedProcess[str]) -> Any:
    return json.loads(p.stdout)


def test_forbidden_nodes_leave_the_node_layers_unknown_not_a_scheduling_verdict(
    api: FakeApiServer, kubeconfig: str
) -> None:
    api.forbidden.add(("nodes", "*"))
    p = gpu_triage("why-pending", *POD, "-o", "json", "--exit-code", kubeconfig=kubeconfig)
    assert p.returncode == 5, p.stderr  # incomplete: neither "blocked" (1) nor "clear" (0)
    report = as_json(p)
    assert report["answer"] == "unknown" and report["failing_layer"] is None
    assert report["unknown_layers"] == ["driver", "device-plugin", "scheduling"]
    status = {f["layer"]: f["status"] for f in report["findings"]}
    assert status == {"driver": "unknown", "device-plugin": "unknown",
                      "scheduling": "unknown", "quota": "ok"}  # fmt: skip
    [unread] = report["unread"]
    assert unread["resource"] == "nodes" and unread["fault"] == "forbidden"
    assert unread["grant"] == "list on nodes at cluster scope"
    assert "no GPU node" not in p.stdout
    text = gpu_triage("why-pending", *POD, kubeconfig=kubeconfig)
    assert text.returncode == 0 and "UNKNOWN" in text.stdout.splitlines()[1]
    assert "Grant list on nodes at cluster scope" in text.stdout


@pytest.mark.parametrize("status", [401, 403])
def test_a_sweep_that_cannot_read_nodes_never_says_nothing_is_stuck(
    api: FakeApiServer, kubeconfig: str, status: int
) -> None:
    api.fail_on["nodes"] = status
    p = gpu_triage("pending", "-A", "--exit-code", kubeconfig=kubeconfig)
    assert p.returncode == 5, p.stdout + p.stderr
    assert "nothing stuck" not in p.stdout and "INCOMPLETE" in p.stdout
    judged = next(line for line in p.stdout.splitlines() if line.startswith("could not judge"))
    assert "team-vision/resnet-train" in judged
    data = as_json(gpu_triage("pending", "-A", "-o", "json", kubeconfig=kubeconfig))
    # every stuck workload is unknown (the tenant's and the operator's own pods), none dropped
    assert data["groups"] == [] and "resnet-train" in [m["name"] for m in data["unknown"]]
    assert {m["namespace"] for m in data["unknown"]} == {"team-vision", "gpu-operator"}


def test_events_that_fail_are_said_and_the_answer_stands_on_the_objects(
    api: FakeApiServer, kubeconfig: str
) -> None:
    api.fail_on["events"] = 503
    p = gpu_triage("pending", "-A", "--exit-code", kubeconfig=kubeconfig)
    assert p.returncode == 1, p.stdout + p.stderr  # the driver blocks it, events or not
    assert "1. driver: NVIDIA driver pods failing" in p.stdout
    assert "could not read: the Kubernetes API at" in p.stdout and "events" in p.stdout
    report = as_json(gpu_triage("why-pending", *POD, "-o", "json", kubeconfig=kubeconfig))
    assert report["failing_layer"] == "driver"
    assert any(n.startswith("events not read") for n in report["notes"])


def test_unread_quota_is_named_in_the_sweep(api: FakeApiServer, kubeconfig: str) -> None:
    api.forbidden.add(("resourcequotas", "*"))
    p = gpu_triage("pending", "-A", kubeconfig=kubeconfig)
    assert "cannot list resourcequotas in namespace team-vision" in p.stdout
    assert "quota not judged for 1 workload(s)" in p.stdout
    data = as_json(gpu_triage("pending", "-A", "-o", "json", kubeconfig=kubeconfig))
    assert any("resourcequotas" in line for line in data["unread"])


def test_a_workload_kind_that_cannot_be_read_is_not_not_found(
    api: FakeApiServer, kubeconfig: str
) -> None:
    api.forbidden.add(("statefulsets", "*"))
    p = gpu_triage("why-pending", "resnet-train", "-n", "team-vision", kubeconfig=kubeconfig)
    assert p.returncode == 3
    assert "could not be looked up as a workload: cannot get statefulsets.apps" in one_line(p)


def test_429_with_retry_after_is_waited_for(api: FakeApiServer, kubeconfig: str) -> None:
    api.fail_statuses = [(429, 1.0)]
    started = time.monotonic()
    p = gpu_triage("why-pending", *POD, "-o", "json", kubeconfig=kubeconfig)
    assert p.returncode == 0, p.stderr
    assert as_json(p)["failing_layer"] == "driver" and time.monotonic() - started >= 1.0


def test_an_expired_continue_token_restarts_the_list(api: FakeApiServer, kubeconfig: str) -> None:
    api.expire_continue = 1
    p = gpu_triage("why-pending", *POD, "-o", "json", "--chunk-size", "3", kubeconfig=kubeconfig)
    assert p.returncode == 0, p.stderr
    assert as_json(p)["failing_layer"] == "driver"


def test_a_trickling_server_meets_the_timeout(api: FakeApiServer, kubeconfig: str) -> None:
    api.trickle = 0.5
    started = time.monotonic()
    p = gpu_triage("why-pending", *POD, "--timeout", "3", kubeconfig=kubeconfig)
    assert p.returncode == 3
    assert "gave up after 3 s reading the cluster" in one_line(p)
    assert time.monotonic() - started < 10


def test_something_that_is_not_a_kubernetes_api(api: FakeApiServer, kubeconfig: str) -> None:
    api.not_kubernetes = True
    p = gpu_triage("why-pending", *POD, kubeconfig=kubeconfig)
    assert p.returncode == 3
    assert "is not a Kubernetes API server" in one_line(p)


def test_a_failing_exec_credential_plugin_is_one_line(tmp_path: Path) -> None:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],
        "users": [{"name": "u", "user": {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1", "command": "sh",
            "args": ["-c", "echo 'token expired: run sso login' >&2; exit 1"]}}}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "x",
    }  # fmt: skip
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps(config))
    p = gpu_triage("why-pending", *POD, kubeconfig=str(path))
    assert p.returncode == 3
    line = one_line(p)
    assert "credentials of context x could not be obtained" in line and "sso login" in line


def test_an_untrusted_certificate_is_one_line(tmp_path: Path) -> None:
    ca = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    with FakeApiServer(load_objects(FIXTURES / "driver-crashloop.yaml"), tls=context) as server:
        untrusted = server.write_kubeconfig(tmp_path / "untrusted")
        p = gpu_triage("why-pending", *POD, kubeconfig=str(untrusted))
        assert p.returncode == 3
        assert "certificate verify failed" in one_line(p)
        trusted = server.write_kubeconfig(tmp_path / "trusted", ca_pem=ca.cert_pem.bytes())
        ok = gpu_triage("why-pending", *POD, "-o", "json", kubeconfig=str(trusted))
        assert ok.returncode == 0 and as_json(ok)["failing_layer"] == "driver"
