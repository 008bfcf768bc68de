"""The client behaves as a well-kept Kubernetes client against a server with faults: 429 and 5xx
retried (Retry-After honoured), an expired continue token restarts the list, a trickling
server meets the deadline, and what is no API server, or no trusted one, is said so."""

from __future__ import annotations

import ssl
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trustme

from kube import transport
from kube.client import GoneError, RawClient, load_client
from kube.errors import NotKubernetesError, TLSError
from kube.lists import list_objects
from kube.live import LiveSource
from kube.testing import FakeApiServer
from kube.transport import Deadline
from tests.builders import node
from triage.cluster.source import KINDS, DeadlineExceededError, UnavailableError


def _client(kubeconfig: str, *, deadline: float | None = None) -> tuple[RawClient, list[float]]:
    api, name = load_client(kubeconfig=kubeconfig)
    waits: list[float] = []
    client = RawClient(api, cluster_name=name, deadline=Deadline(deadline), sleep=waits.append)
    return client, waits


@pytest.fixture
def nodes(api: FakeApiServer) -> list[str]:
    names = [f"n{i:02d}" for i in range(7)]
    for n in names:
        api.apply(node(n), record=False)
    return names


def test_429_waits_as_long_as_retry_after_says(api: FakeApiServer, kubeconfig: str) -> None:
    api.apply(node("a1"), record=False)
    api.fail_statuses = [(429, 1.5)]
    client, waits = _client(kubeconfig)
    items, _ = list_objects(client, KINDS["Node"])
    assert [i["metadata"]["name"] for i in items] == ["a1"]
    assert waits == [1.5] and client.requests == 2


def test_a_passing_5xx_is_retried_with_a_growing_jittered_backoff(
    api: FakeApiServer, kubeconfig: str
) -> None:
    api.apply(node("a1"), record=False)
    api.fail_statuses = [503, 502, 500]
    client, waits = _client(kubeconfig)
    assert client.get_json(KINDS["Node"], verb="get", name="a1") is not None
    assert len(waits) == 3 and waits == sorted(waits)
    assert 0.4 <= waits[0] <= 0.6 and 1.6 <= waits[2] <= 2.4


def test_a_lasting_5xx_is_unavailable_after_the_retries(
    api: FakeApiServer, kubeconfig: str
) -> None:
    api.fail_on["nodes"] = 503
    client, waits = _client(kubeconfig)
    with pytest.raises(UnavailableError, match=r"answered 503 to list nodes \(after retries\)"):
        list_objects(client, KINDS["Node"])
    assert client.requests == transport.ATTEMPTS and len(waits) == transport.ATTEMPTS - 1


def test_a_retry_after_past_the_deadline_is_not_waited(api: FakeApiServer, kubeconfig: str) -> None:
    api.fail_statuses = [(429, 30.0)]
    client, waits = _client(kubeconfig, deadline=5.0)
    with pytest.raises(UnavailableError, match="answered 429"):
        list_objects(client, KINDS["Node"])
    assert waits == []  # capped at 10 s, still past the 5 s left: the 429 is the answer


def test_an_expired_continue_token_restarts_the_list(
    api: FakeApiServer, kubeconfig: str, nodes: list[str]
) -> None:
    api.expire_continue = 2  # the second page of the first two attempts answers 410
    client, _ = _client(kubeconfig)
    items, _ = list_objects(client, KINDS["Node"], page_size=3)
    assert [i["metadata"]["name"] for i in items] == nodes  # each once, in order
    assert api.count(path_contains="/nodes") == 2 + 2 + 3  # two cut short, one whole


def test_a_continue_token_that_always_expires_gives_up(
    api: FakeApiServer, kubeconfig: str, nodes: list[str]
) -> None:
    api.expire_continue = 100
    client, _ = _client(kubeconfig)
    with pytest.raises(GoneError, match="continue token expired"):
        list_objects(client, KINDS["Node"], page_size=3)


def test_a_trickling_server_meets_the_command_deadline(
    api: FakeApiServer, kubeconfig: str, nodes: list[str]
) -> None:
    api.trickle = 0.2  # a byte every 0.2 s: no socket read ever times out
    client, _ = _client(kubeconfig, deadline=2.0)
    started = time.monotonic()
    with pytest.raises(DeadlineExceededError, match="gave up after 2 s"):
        list_objects(client, KINDS["Node"])
    assert time.monotonic() - started < 4.0


def test_a_trickling_answer_ends_at_the_request_limit_without_a_deadline(
    api: FakeApiServer, kubeconfig: str, nodes: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(transport, "READ_TIMEOUT", 1.5)
    api.trickle = 0.2
    client, _ = _client(kubeconfig)
    started = time.monotonic()
    with pytest.raises(UnavailableError, match="did not send its answer to list nodes within"):
        list_objects(client, KINDS["Node"])
    assert time.monotonic() - started < 3.5


def test_a_web_server_is_not_a_kubernetes_api(api: FakeApiServer, kubeconfig: str) -> None:
    api.not_kubernetes = True
    source = LiveSource(_client(kubeconfig)[0])
    with pytest.raises(NotKubernetesError, match="is not a Kubernetes API server: it answered 404"):
        source.get("Pod", "x", namespace="default")
    with pytest.raises(NotKubernetesError):
        source.objects("Node")


@pytest.fixture
def tls_api(tmp_path: Path) -> Iterator[tuple[FakeApiServer, trustme.CA]]:
    ca = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    with FakeApiServer([node("a1")], tls=context) as server:
        yield server, ca


def test_an_untrusted_certificate_is_a_tls_error(
    tls_api: tuple[FakeApiServer, trustme.CA], tmp_path: Path
) -> None:
    server, ca = tls_api
    untrusted = server.write_kubeconfig(tmp_path / "untrusted")
    said = r"TLS with the Kubernetes API at https://\S+ failed: certificate verify failed"
    with pytest.raises(TLSError, match=said) as info:
        LiveSource(_client(str(untrusted))[0]).objects("Node")
    assert "\n" not in str(info.value)
    trusted = server.write_kubeconfig(tmp_path / "trusted", ca_pem=ca.cert_pem.bytes())
    assert [
        n["metadata"]["name"] for n in LiveSource(_client(str(trusted))[0]).objects("Node")
    ] == ["a1"]


def test_a_widened_deadline_counts_from_the_command_s_start() -> None:
    now = [1000.0]
    deadline = Deadline(120, clock=lambda: now[0], wide=600)
    now[0] += 100
    deadline.widen()
    assert deadline.left() == 500
    now[0] += 600
    with pytest.raises(DeadlineExceededError, match="gave up after 600 s"):
        deadline.within(30)
    fixed = Deadline(45, clock=lambda: now[0])
    fixed.widen()  # a deadline the user gave: no wide one
    assert (fixed.seconds, fixed.left()) == (45, 45)
