"""A long list of every namespace's objects, from an API server far away, is read one
namespace at a time, a few at once (`kube.lists.list_objects`): what it returns, and in
which order, is what the list read whole returns; a namespace that cannot be read fails the
list; a list whose pages come as fast as they are taken in is read whole.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.synth import cluster
from kube.client import RawClient, load_client
from kube.lists import SPLIT_AFTER, SPLIT_PAGES, kind_type, list_objects
from kube.live import ACTIVE_PODS, connect
from kube.testing import FakeApiServer
from kube.transport import Deadline
from tests.builders import pod
from tests.kube.test_kube_live_reads import NOW, Listed
from triage.cluster.errors import DeadlineExceededError
from triage.cluster.objects import name_of, ns_of
from triage.cluster.source import ForbiddenError
from triage.fleet import sweep

Obj = dict[str, Any]
PODS = kind_type("Pod")
# Namespaces whose order differs between their names ("a" < "a-b") and the API server's
# storage keys ("a-b/x" < "a/x"): a list is in the keys' order.
NAMESPACES = ["b", "a", "a-b", "c"]
PAGE = 5  # 60 pods, 12 pages: a list long enough to split


@pytest.fixture
def far(tmp_path: Path) -> Iterator[tuple[FakeApiServer, RawClient]]:
    """15 pods in each of NAMESPACES, served 20 ms a request away."""
    objs = [pod(f"p{i:02d}", ns=ns) for ns in NAMESPACES for i in range(15)]
    with FakeApiServer(objs) as api:
        api.latency = 0.02
        config = api.write_kubeconfig(tmp_path / "kubeconfig", context="fake")
        client = RawClient(load_client(kubeconfig=str(config))[0], cluster_name="fake")
        try:
            yield api, client
        finally:
            client.close()


def keys(items: list[Obj]) -> list[tuple[str, str]]:
    return [(ns_of(o), name_of(o)) for o in items]


def namespaced(api: FakeApiServer, since: int = 0) -> list[str]:
    """The namespaces whose pods were listed (one entry per page) since request `since`."""
    return [p.split("/")[4] for p, _ in api.requests[since:] if p.startswith("/api/v1/namespaces/")]


def test_a_long_list_from_far_away_is_read_by_namespace_in_the_servers_order(
    far: tuple[FakeApiServer, RawClient],
) -> None:
    api, client = far
    whole, _ = list_objects(client, PODS, page_size=PAGE)
    assert not namespaced(api) and len(whole) == 60
    assert [ns for ns, _ in keys(whole)][::15] == ["a-b", "a", "b", "c"]

    taken: list[str] = []
    asked = len(api.requests)
    split, version = list_objects(
        client,
        PODS,
        page_size=PAGE,
        transform=lambda o: taken.append(name_of(o)) or o,  # type: ignore[func-returns-value]
        namespaces=lambda: NAMESPACES,
    )
    assert keys(split) == keys(whole) and version == ""  # no one resourceVersion
    assert sorted(set(namespaced(api, asked))) == sorted(NAMESPACES)
    assert len(namespaced(api, asked)) == 4 * 3  # each namespace's 15 pods, 5 a page
    # The pages read whole before it split (to see the round trips set the pace) were dropped:
    # the progress a command shows counts each pod once (and once in the list read whole).
    assert client.listed()["pods"] == 60 + 60
    assert len(taken) == (1 + SPLIT_AFTER) * PAGE + 60


def test_a_selected_list_is_measured_by_its_kind_s_whole_list(
    far: tuple[FakeApiServer, RawClient],
) -> None:
    """A list with a field selector does not say how long it is: one page of one object of
    the whole kind does."""
    api, client = far
    for o in api.objects_of("Pod")[::3]:
        api.apply(o | {"status": {"phase": "Succeeded"}})
    whole, _ = list_objects(client, PODS, page_size=PAGE, field_selector=ACTIVE_PODS)
    asked = len(api.requests)
    split, _ = list_objects(
        client, PODS, page_size=PAGE, field_selector=ACTIVE_PODS, namespaces=lambda: NAMESPACES
    )
    assert keys(split) == keys(whole) and len(whole) == 40
    probes = [q for p, q in api.requests[asked:] if p == "/api/v1/pods" and q.get("limit") == "1"]
    assert probes == [{"limit": "1"}]
    assert all(
        q["fieldSelector"] == ACTIVE_PODS for p, q in api.requests[asked:] if "/namespaces/" in p
    )


@pytest.mark.parametrize(
    ("why", "page", "names"),
    [
        ("the namespaces cannot be listed", PAGE, lambda: None),
        ("it is short", 60 // (SPLIT_PAGES - 1), lambda: NAMESPACES),
        ("more namespaces than two a page", PAGE, lambda: [f"ns-{i}" for i in range(40)]),
    ],
)
def test_a_list_is_read_whole_when_splitting_would_not_pay(
    far: tuple[FakeApiServer, RawClient], why: str, page: int, names: Any
) -> None:
    api, client = far
    items, version = list_objects(client, PODS, page_size=page, namespaces=names)
    assert len(items) == 60 and version != "" and not namespaced(api), why


def test_a_list_whose_pages_keep_up_is_read_whole(far: tuple[FakeApiServer, RawClient]) -> None:
    """Each page taken in longer than the next takes to come: the work sets the pace, and
    reading by namespace would only add requests."""
    api, client = far
    api.latency = 0.0

    def slow(o: Obj) -> Obj:
        time.sleep(0.01)
        return o

    items, _ = list_objects(
        client, PODS, page_size=PAGE, transform=slow, namespaces=lambda: NAMESPACES
    )
    assert len(items) == 60 and not namespaced(api)


def test_a_namespace_that_cannot_be_read_fails_the_list(
    far: tuple[FakeApiServer, RawClient],
) -> None:
    """Not a list short of that namespace's pods: the command says what it could not read."""
    api, client = far
    api.forbidden.add(("pods", "c"))
    started = time.monotonic()
    with pytest.raises(ForbiddenError) as refused:
        list_objects(client, PODS, page_size=PAGE, namespaces=lambda: NAMESPACES)
    assert "in namespace c" in str(refused.value)
    assert time.monotonic() - started < 10  # the other namespaces' reads were stopped


def test_a_sweep_read_by_namespace_answers_as_one_read_whole(tmp_path: Path) -> None:
    """`pending -A` from far away: every pod and Job (and event) read by namespace, the Jobs
    filed as they come for the pods' strings, and the sweep's answer unchanged."""
    objs, _ = cluster(nodes=20, pods=300)
    every = Listed(objs)
    with FakeApiServer(json.loads(json.dumps(objs))) as api:
        api.latency = 0.05
        config = str(api.write_kubeconfig(tmp_path / "kubeconfig", context="fake"))
        live = connect(kubeconfig=config, read_ahead="sweep", page_size=10)
        try:
            got = sweep(live, now=NOW).model_dump()
            listed = live.client.listed()
            pods = live.objects("Pod")
            known = live.count("Pod")  # those held aside too: a Job's finished pods
        finally:
            live.close()
    assert got == sweep(every, now=NOW).model_dump()
    by_namespace = {p.rsplit("/", 1)[1] for p, _ in api.requests if p.count("/namespaces/")}
    assert by_namespace >= {"pods", "jobs"}
    assert listed["pods"] == known == len(every.objects("Pod")) > len(pods)
    assert keys(pods) == sorted(keys(pods), key=lambda k: f"{k[0]}/{k[1]}")


def test_a_list_read_by_namespace_ends_on_the_command_s_deadline(
    far: tuple[FakeApiServer, RawClient],
) -> None:
    """The namespaces' reads share the command's deadline: it ends the list with the error
    every read past it gives, not a list short of what was left to read, nor a wait."""
    api, client = far
    api.latency = 0.25  # 1 s for the pages read whole, then 0.75 s by namespace
    client.deadline = Deadline(1.4)
    started = time.monotonic()
    with pytest.raises(DeadlineExceededError, match=r"gave up after 1\.4 s"):
        list_objects(client, PODS, page_size=PAGE, namespaces=lambda: NAMESPACES)
    assert namespaced(api) and time.monotonic() - started < 5


@pytest.mark.parametrize("read", ["every pod", "every active pod"])
def test_a_list_a_source_reads_when_asked_splits_without_waiting_on_itself(
    read: str, tmp_path: Path
) -> None:
    """A list the source reads on the asking thread (not read ahead: a sweep's events in the
    bot, the active pods a scheduling filter counts) asks the source for the namespaces when
    it splits: it used to do so holding the lock that read takes, and waited forever."""
    import threading

    from triage.cluster.indexes import ANY, POD_ACTIVE

    objs = [pod(f"p{i:02d}", ns=ns) for ns in NAMESPACES for i in range(20)]
    objs += [{"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": ns}}
             for ns in NAMESPACES]  # fmt: skip
    with FakeApiServer(objs) as api:
        api.latency = 0.02
        config = str(api.write_kubeconfig(tmp_path / "kubeconfig", context="fake"))
        live = connect(kubeconfig=config, page_size=PAGE)
        answers: list[list[Obj] | None] = []

        def ask() -> None:
            if read == "every pod":
                answers.append(live.objects("Pod"))
            else:
                answers.append(live.indexed("Pod", POD_ACTIVE, ANY))

        asking = threading.Thread(target=ask, daemon=True)  # (a deadlock must not hang pytest)
        try:
            asking.start()
            asking.join(30)
            assert not asking.is_alive(), "the read waits on itself"
        finally:
            live.close()
    got = answers[0] or []
    assert sorted(keys(got)) == sorted(keys(objs[: len(NAMESPACES) * 20]))
    assert namespaced(api)  # it was read by namespace
