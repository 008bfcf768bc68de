"""The cache holds a Job's finished pods aside: it keeps their names, not the pods, and reads
one from the API when a question is about it or its Job. Every answer must be what a source
holding every pod gives; these tests compare them through the loopback fake API server."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import kube.informer as informer_mod
from kube.aside import GET_EACH as _GET_EACH
from kube.aside import holding, kept
from kube.cache import CachedSource
from kube.client import RawClient, load_client
from kube.live import connect
from kube.testing import FakeApiServer
from tests.builders import node, pod
from tests.kube.test_kube_cache import wait_for
from triage import triage
from triage.cluster.indexes import BY_NAME, POD_OWNER, WORKLOAD_OPEN, owned_pods
from triage.cluster.memory import MemorySource
from triage.cluster.source import KINDS, ReadFailedError, by_namespace, key
from triage.fleet import sweep
from triage.render import report_data

Obj = dict[str, Any]
NOW = datetime(2026, 12, 3, tzinfo=UTC)
NS = "team-a"


def job(name: str, *, done: bool, completions: int = 1, failed: bool = False) -> Obj:
    status: Obj = {"succeeded": 0}
    if done or failed:
        status["conditions"] = [{"type": "Failed" if failed else "Complete", "status": "True"}]
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}",
                         "creationTimestamp": "2026-12-02T12:00:00Z"},
            "spec": {"parallelism": 1, "completions": completions,
                     "template": {"spec": pod("x")["spec"]}},
            "status": status}  # fmt: skip


def of_job(name: str, owner: str, *, phase: str, created: str, node_name: str = "n0") -> Obj:
    p = pod(name, node_name=node_name, phase=phase, selector={}, owner=("Job", owner))
    p["metadata"]["creationTimestamp"] = created
    p["metadata"]["ownerReferences"][0]["apiVersion"] = "batch/v1"
    if phase == "Succeeded":
        p["status"]["containerStatuses"] = [{"name": "main", "ready": False, "restartCount": 0,
            "state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}]  # fmt: skip
    return p


def batch() -> list[Obj]:
    """A Job finished with its pod; one with more finished pods than are read one by one; one
    with an old finished pod and a running one created in the same second; one that wants
    more pods, its only pod finished (between two pods); one whose pod waits; one that failed
    when kubelet rejected its pod."""
    objs: list[Obj] = [node("n0"), node("n1")]
    objs += [job("done", done=True), of_job("done-x1", "done", phase="Succeeded",
                                             created="2026-12-02T12:00:01Z")]  # fmt: skip
    objs.append(job("big", done=True, completions=_GET_EACH + 3))
    objs += [
        of_job(f"big-{i:02d}", "big", phase="Succeeded", created=f"2026-12-02T12:00:{10 + i}Z")
        for i in range(_GET_EACH + 3)
    ]
    objs += [job("mixed", done=False, completions=2),
             of_job("mixed-b", "mixed", phase="Succeeded", created="2026-12-02T12:01:00Z"),
             of_job("mixed-a", "mixed", phase="Running", created="2026-12-02T12:01:00Z",
                    node_name="n1")]  # fmt: skip
    objs += [
        job("between", done=False, completions=3),
        of_job("between-1", "between", phase="Succeeded", created="2026-12-02T12:02:00Z"),
    ]
    objs += [job("waiting", done=False), pod("waiting-1", gpus=2, owner=("Job", "waiting"))]
    rejected = of_job("rejected-1", "rejected", phase="Failed", created="2026-12-02T12:03:00Z")
    rejected["status"] |= {
        "reason": "UnexpectedAdmissionError",
        "message": "Pod was rejected: Allocate failed due to no healthy devices",
    }
    objs += [job("rejected", done=False, failed=True), rejected]  # fmt: skip
    return objs


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[FakeApiServer, CachedSource]]:
    api = FakeApiServer(json.loads(json.dumps(batch()))).start()
    kubeconfig = api.write_kubeconfig(tmp_path / "kubeconfig", context="fake")
    client, name = load_client(kubeconfig=str(kubeconfig))
    cache = CachedSource(RawClient(client, cluster_name=name), watch_timeout=5, max_backoff=0.2)
    cache.start()
    assert cache.wait_synced(10)
    try:
        yield api, cache
    finally:
        cache.close()
        api.stop()


def every(api: FakeApiServer) -> MemorySource:
    """A source holding every object the server holds now."""
    objs = [o for kind in ("Node", "Pod", "Job") for o in api.objects_of(kind)]
    return MemorySource(json.loads(json.dumps(objs)), cluster_name="fake")


def report(source: Any, name: str) -> Obj:
    data = report_data(triage(source, namespace=NS, name=name, now=NOW))
    return data


def reads(api: FakeApiServer, since: int) -> list[tuple[str, str]]:
    """The gets and lists sent since request `since` (not watches)."""
    return [(p, q.get("fieldSelector", "")) for p, q in api.requests[since:] if "watch" not in q]


def names(pods: list[Obj]) -> list[str]:
    return sorted(p["metadata"]["name"] for p in pods)


def read_when_asked(source: Any, api: FakeApiServer) -> None:
    """A finished pod asked by name: one get. A Job's few finished pods: one get each; many:
    one list of the namespace's finished pods. A name the source does not know: no read."""
    since = len(api.requests)
    assert source.get("Pod", "done-x1", namespace=NS)["status"]["phase"] == "Succeeded"
    assert reads(api, since) == [(f"/api/v1/namespaces/{NS}/pods/done-x1", "")]
    since = len(api.requests)
    got = owned_pods(source, namespace=NS, owners=[("Job", "big")])
    assert names(got) == [f"big-{i:02d}" for i in range(_GET_EACH + 3)]
    assert reads(api, since) == [(f"/api/v1/namespaces/{NS}/pods", "status.phase=Succeeded")]
    since = len(api.requests)
    assert source.get("Pod", "nothing", namespace=NS) is None
    assert reads(api, since) == []


def known_by_name(source: Any) -> None:
    """Which Jobs have pods, which Jobs exist, which open Jobs have no pod: from the names."""
    keys = [(NS, "Job", n) for n in ("done", "big", "mixed", "between", "waiting", "none")]
    assert source.filed("Pod", POD_OWNER, keys) == [True, True, True, True, True, False]
    named = [(NS, n) for n in ("done", "rejected", "waiting", "none")]  # a Job, by its name
    assert source.filed("Job", BY_NAME, named) == [True, True, True, False]
    assert source.unmatched("Job", WORKLOAD_OPEN, "Pod", POD_OWNER) == []  # "between" has one


def test_finished_pods_of_jobs_are_known_by_name_and_read_when_asked(
    served: tuple[FakeApiServer, CachedSource],
) -> None:
    api, cache = served
    finished = _GET_EACH + 6
    assert names(cache.objects("Pod")) == ["mixed-a", "rejected-1", "waiting-1"]
    assert names(cache.objects("Job")) == ["between", "mixed", "waiting"]
    assert cache.stats()["pods_held_aside"] == finished
    assert cache.stats()["jobs_held_aside"] == 3
    assert cache.status().pods == finished + 3  # what it knows of, held or not
    assert cache.count("Job", namespace=NS) == 6
    memory = every(api)
    for name in ("done", "done-x1", "big", "big-03", "mixed", "mixed-b", "between", "waiting",
                 "rejected", "rejected-1"):  # fmt: skip
        assert report(cache, name) == report(memory, name), name
    # A finished Job asked about: it and its pod read by a get each (the Job once, not again
    # as its pod's owner), and the events.
    since = len(api.requests)
    report(cache, "job/done")
    got = [r for r in reads(api, since) if "events" not in r[0]]
    job_read = (f"/apis/batch/v1/namespaces/{NS}/jobs/done", "")
    assert got == [job_read, (f"/api/v1/namespaces/{NS}/pods/done-x1", "")]
    read_when_asked(cache, api)


def test_a_job_between_two_pods_has_pods_and_a_sweep_says_what_every_pod_says(
    served: tuple[FakeApiServer, CachedSource],
) -> None:
    api, cache = served
    known_by_name(cache)
    memory = every(api)
    since = len(api.requests)
    swept = sweep(cache, now=NOW)
    assert swept.model_dump() == sweep(memory, now=NOW).model_dump()
    # The rejected pod is its finished Job's, as every object says.
    assert ("Job", "rejected") in {(m.kind, m.name) for g in swept.groups for m in g.members}
    assert [r for r in reads(api, since) if "/pods" in r[0]] == []  # no pod read for a sweep
    api.delete("Pod", "between-1", namespace=NS)  # gone: the Job now has no pod
    wait_for(lambda: cache.stats()["pods_held_aside"] == _GET_EACH + 5)
    assert [w["metadata"]["name"] for w in cache.unmatched("Job", WORKLOAD_OPEN, "Pod", POD_OWNER)
            ] == ["between"]  # fmt: skip
    assert sweep(cache, now=NOW).model_dump() == sweep(every(api), now=NOW).model_dump()


def test_a_pod_that_finishes_is_held_aside_and_one_deleted_is_forgotten(
    served: tuple[FakeApiServer, CachedSource],
) -> None:
    api, cache = served
    usage = cache.node_usage()["n1"].pods
    assert usage == [f"{NS}/mixed-a"]
    api.apply(of_job("mixed-a", "mixed", phase="Succeeded", created="2026-12-02T12:01:00Z",
                     node_name="n1"))  # fmt: skip
    wait_for(lambda: cache.stats()["pods_held_aside"] == _GET_EACH + 7)
    assert names(cache.objects("Pod")) == ["rejected-1", "waiting-1"]
    assert cache.node_usage().get("n1") is None or cache.node_usage()["n1"].pods == []
    assert report(cache, "mixed") == report(every(api), "mixed")
    assert names(owned_pods(cache, namespace=NS, owners=[("Job", "mixed")])) == [
        "mixed-a", "mixed-b"]  # fmt: skip
    api.apply(job("mixed", done=True, completions=2))  # its Job completes: held aside too
    wait_for(lambda: cache.stats()["jobs_held_aside"] == 4)
    assert names(cache.objects("Job")) == ["between", "waiting"]
    assert report(cache, "mixed") == report(every(api), "mixed")
    api.delete("Pod", "done-x1", namespace=NS)
    wait_for(lambda: cache.stats()["pods_held_aside"] == _GET_EACH + 6)
    since = len(api.requests)
    assert cache.get("Pod", "done-x1", namespace=NS) is None
    assert reads(api, since) == []
    assert report(cache, "done") == report(every(api), "done")


def test_a_finished_pod_that_cannot_be_read_is_said_not_missing(
    served: tuple[FakeApiServer, CachedSource],
) -> None:
    api, cache = served
    want = report(cache, "waiting-1")
    api.fail_on["pods"] = 503
    for name in ("done-x1", "done"):  # the pod itself, or as its Job's pod
        with pytest.raises(ReadFailedError, match=r"503|injected"):
            triage(cache, namespace=NS, name=name, now=NOW)
    # What the cache holds is still answered from it.
    assert report(cache, "waiting-1") == want


def test_a_sweep_from_the_cli_holds_finished_pods_and_jobs_aside_as_the_cache_does(
    tmp_path: Path,
) -> None:
    """`pending -A` reads every pod and Job once (`LiveSource`, read ahead for a sweep): the
    finished ones are known by name, as in the cache, and every answer is still what a source
    holding every object gives; one asked about is read from the API, and one that cannot be
    read is said, never "not found"."""
    api = FakeApiServer(json.loads(json.dumps(batch()))).start()
    kubeconfig = str(api.write_kubeconfig(tmp_path / "kubeconfig", context="fake"))
    live = connect(kubeconfig=kubeconfig, read_ahead="sweep")
    try:
        memory = every(api)
        assert sweep(live, now=NOW).model_dump() == sweep(memory, now=NOW).model_dump()
        assert names(live.objects("Pod")) == ["mixed-a", "rejected-1", "waiting-1"]
        assert names(live.objects("Job", namespace=NS)) == ["between", "mixed", "waiting"]
        assert live.count("Pod") == len(memory.objects("Pod")) == _GET_EACH + 9
        assert live.count("Job", namespace=NS) == 6 and live.count("Job", namespace="x") == 0
        known_by_name(live)
        for name in ("done", "done-x1", "big", "big-03", "mixed", "mixed-b", "between",
                     "waiting", "rejected", "rejected-1"):  # fmt: skip
            assert report(live, name) == report(memory, name), name
        read_when_asked(live, api)
        # `why-pending job/mixed` reads the Job once, not again as its picked pod's owner.
        one = connect(kubeconfig=kubeconfig, read_ahead="triage")
        since = len(api.requests)
        assert report(one, "job/mixed") == report(memory, "job/mixed")
        job_reads = [r for r in reads(api, since) if r[0].endswith("/jobs/mixed")]
        assert job_reads == [(f"/apis/batch/v1/namespaces/{NS}/jobs/mixed", "")]
        one.close()
        api.fail_on["pods"] = 503
        with pytest.raises(ReadFailedError, match=r"503|injected"):
            live.get("Pod", "done-x1", namespace=NS)
    finally:
        live.close()
        api.stop()


def _owned(name: str, job_name: str, phase: str, ns: str) -> Obj:
    p = pod(name, node_name="n0", phase=phase, ns=ns, selector={}, owner=("Job", job_name))
    if phase == "Orphan":
        p["status"]["phase"] = "Succeeded"
        del p["metadata"]["ownerReferences"]
    return p


def _aside(p: Obj) -> str | None:
    refs = p["metadata"].get("ownerReferences") or []
    if p["status"].get("phase") != "Succeeded" or len(refs) != 1:
        return None
    return str(refs[0]["name"])


def test_the_store_and_what_it_holds_aside_follow_any_order_of_events() -> None:
    """500 random watch events (pods of Jobs made, running, failing, finishing, orphaned,
    deleted) and a relist: every read of the store and of what it holds aside equals a plain
    dict of the same pods, and `on_change` sees a pod held aside as gone."""
    rnd = random.Random(7)
    changes: list[tuple[str | None, str | None]] = []

    def seen(old: Obj | None, new: Obj | None) -> None:
        changes.append(tuple(o and o["metadata"]["name"] for o in (old, new)))  # type: ignore[arg-type]

    inf = informer_mod.Informer(None, KINDS["Pod"], aside=_aside, on_change=seen)  # type: ignore[arg-type]
    held: dict[tuple[str, str], Obj] = {}
    namespaces = ("team-0", "team-1")
    assert inf.indexed(POD_OWNER, ("team-0", "Job", "a")) == []  # built now, kept current

    def check() -> None:
        store = {k: p for k, p in held.items() if _aside(p) is None}
        assert sorted(key(p) for p in inf.items()) == sorted(store)
        assert inf.aside_count() == len(held) - len(store)
        for ns in namespaces:
            for i in range(10):
                p = held.get((ns, f"p{i}"))
                assert inf.aside_of(ns, f"p{i}") == (None if p is None else _aside(p))
            for owner in ("a", "b", "c"):
                want = sorted(n for (s, n), p in held.items() if s == ns and _aside(p) == owner)
                assert sorted(inf.aside_names(ns, owner)) == want
                assert inf.aside_owned([(ns, owner)]) == [bool(want)]
                assert names(inf.indexed(POD_OWNER, (ns, "Job", owner))) == sorted(
                    n for (s, n), p in store.items()
                    if s == ns and [r["name"] for r in p["metadata"].get("ownerReferences", [])]
                    == [owner]
                )  # fmt: skip

    for _ in range(500):
        ns, name = rnd.choice(namespaces), f"p{rnd.randrange(10)}"
        before = held.get((ns, name))
        if before is not None and rnd.random() < 0.3:
            del held[(ns, name)]
            inf._apply({"type": "DELETED", "object": json.loads(json.dumps(before))})
        else:
            phase = rnd.choice(["Running", "Failed", "Succeeded", "Succeeded", "Orphan"])
            p = held[(ns, name)] = _owned(name, rnd.choice("abc"), phase, ns)
            event = "MODIFIED" if before is not None else "ADDED"
            del changes[:]
            inf._apply({"type": event, "object": json.loads(json.dumps(p))})
            if before is not None and _aside(before) is None and _aside(p) is not None:
                assert changes == [(name, None)]  # gone from the store, for the usage index
            if before is not None and _aside(before) is not None and _aside(p) is not None:
                assert changes == []
        check()
    # A relist: the list's objects, as a watch-list stream or pages hand them to the store.
    aside: dict[str, dict[str, str]] = {}
    project = holding(inf._project, _aside, aside)
    items = kept([project(json.loads(json.dumps(p))) for p in held.values()], aside)

    def initial(into: dict[str, dict[str, str]]) -> tuple[list[Obj], str, Any]:
        into.update(aside)
        return items, "9", by_namespace(items)

    inf._initial = initial  # type: ignore[method-assign]
    inf._replace()
    check()
