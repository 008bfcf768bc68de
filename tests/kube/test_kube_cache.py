"""The watch-backed cache through the real client against the loopback fake API server."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest

import kube.lists
from kube.cache import CachedSource, ClusterRegistry
from kube.client import RawClient, load_client
from kube.errors import ConfigError
from kube.live import LiveSource
from kube.slim import projection
from kube.testing import FakeApiServer, write_kubeconfig
from tests.builders import event, node, pod
from triage.cluster.memory import MemorySource
from triage.cluster.objects import Obj
from triage.cluster.source import ForbiddenError, UnavailableError
from triage.cluster.usage import NodeUsage


def wait_for(check: Callable[[], bool], *, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        time.sleep(0.02)


def usage_view(usage: Mapping[str, NodeUsage]) -> dict[str, tuple[dict[str, int], list[str]]]:
    return {n: (u.requests, sorted(u.pods)) for n, u in usage.items()}


def seed(api: FakeApiServer) -> None:
    for i in range(4):
        api.apply(node(f"n{i}"))
    for i in range(30):
        api.apply(
            pod(
                f"p{i:02d}",
                node_name=f"n{i % 4}",
                gpus=i % 3,
                ns=f"team-{i % 2}",
                phase="Running",
                selector={},
            )
        )
    api.apply({"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "team-0"}})


@pytest.fixture
def cache(api: FakeApiServer, kubeconfig: str) -> Iterator[CachedSource]:
    seed(api)
    client_api, name = load_client(kubeconfig=kubeconfig)
    src = CachedSource(
        RawClient(client_api, cluster_name=name), watch_timeout=5, max_backoff=0.2, stale_after=0
    )
    src.start()
    assert src.wait_synced(10)
    yield src
    src.close()


def fresh(kubeconfig: str) -> LiveSource:
    api, name = load_client(kubeconfig=kubeconfig)
    return LiveSource(RawClient(api, cluster_name=name))


def same_as_fresh_list(cache: CachedSource, kubeconfig: str) -> bool:
    live = fresh(kubeconfig)
    for kind in ("Node", "Pod", "Namespace"):
        want = sorted(
            (json.dumps(projection(kind)(o), sort_keys=True) for o in live.objects(kind)),
        )
        got = sorted(json.dumps(o, sort_keys=True) for o in cache.objects(kind))
        if want != got:
            return False
    return usage_view(cache.node_usage()) == usage_view(
        MemorySource(live.objects("Pod")).node_usage()
    )


def test_initial_sync_matches_a_memory_source(cache: CachedSource, kubeconfig: str) -> None:
    assert same_as_fresh_list(cache, kubeconfig)
    assert len(cache.objects("Pod")) == 30
    assert len(cache.objects("Pod", namespace="team-1")) == 15
    got = cache.get("Pod", "p03", namespace="team-1")
    assert got is not None and got["kind"] == "Pod" and got["spec"]["nodeName"] == "n3"
    assert cache.get("Namespace", "team-0") is not None
    assert cache.get("Namespace", "nope") is None
    assert cache.objects("Workload") == []
    assert cache.staleness_note() is None


def test_converges_after_adds_updates_deletes(
    api: FakeApiServer, cache: CachedSource, kubeconfig: str
) -> None:
    api.apply(pod("new", node_name="n1", gpus=4, phase="Running", selector={}))
    api.apply(
        pod("p00", node_name="n2", gpus=1, ns="team-0", phase="Running", selector={})
    )  # moved and resized
    api.apply(
        pod("p01", node_name="n1", gpus=1, ns="team-1", phase="Succeeded", selector={})
    )  # finished
    api.delete("Pod", "p02", namespace="team-0")
    api.delete("Node", "n3")
    api.apply(node("n9", gpus=2))
    for i in range(10, 20):
        api.delete("Pod", f"p{i:02d}", namespace=f"team-{i % 2}")
    wait_for(lambda: same_as_fresh_list(cache, kubeconfig))
    usage = cache.node_usage()
    assert "team-1/p01" not in usage["n1"].pods
    assert usage["n1"].requests["nvidia.com/gpu"] >= 4


def test_expired_resource_version_relists(
    api: FakeApiServer, cache: CachedSource, kubeconfig: str
) -> None:
    pods = cache._informers["Pod"]
    api.apply(
        pod("missed", node_name="n0", gpus=8, phase="Running", selector={}), record=False
    )  # the watch never hears of it
    api.compact()
    api.drop_watches()
    wait_for(lambda: pods.relists >= 1)
    wait_for(lambda: same_as_fresh_list(cache, kubeconfig))
    assert cache.node_usage()["n0"].requests["nvidia.com/gpu"] >= 8


def test_dropped_watch_resumes_without_relisting(
    api: FakeApiServer, cache: CachedSource, kubeconfig: str
) -> None:
    # A pod the watch brings first: the stream is open (a watch asked for but not yet
    # served when the streams drop would not be dropped, and would bring the next pod).
    api.apply(pod("before-drop", node_name="n2", gpus=1, phase="Running", selector={}))
    wait_for(lambda: cache.get("Pod", "before-drop", namespace="team-a") is not None)
    watches = api.count(path_contains="/pods", watch=True)
    lists = api.count(path_contains="/pods", watch=False)
    api.drop_watches()
    api.apply(pod("after-drop", node_name="n2", gpus=2, phase="Running", selector={}))
    wait_for(lambda: cache.get("Pod", "after-drop", namespace="team-a") is not None)
    assert api.count(path_contains="/pods", watch=True) > watches
    assert cache._informers["Pod"].relists == 0
    assert api.count(path_contains="/pods", watch=False) == lists  # resumed, not relisted
    assert same_as_fresh_list(cache, kubeconfig)


def test_warm_triage_reads_cost_one_request(api: FakeApiServer, cache: CachedSource) -> None:
    api.apply(
        event(event_name="e1", ns="team-0", kind="Pod", name="p00", reason="FailedScheduling")
    )
    before = api.count(watch=False)
    cache.get("Namespace", "team-0")
    cache.get("Pod", "p00", namespace="team-0")
    cache.objects("Node")
    cache.objects("ResourceQuota", namespace="team-0")
    cache.node_usage()
    evs = cache.events_for(namespace="team-0", kind="Pod", name="p00")
    assert [e["reason"] for e in evs] == ["FailedScheduling"]
    assert api.count(watch=False) == before + 1


def test_lost_server_is_reported_stale_and_still_served(
    api: FakeApiServer, cache: CachedSource
) -> None:
    api.stop()
    wait_for(lambda: cache.staleness_note() is not None)
    note = cache.staleness_note()
    assert note is not None and note.startswith("cluster data may be up to")
    assert "lost the watch on" in note and "\n" not in note
    assert len(cache.objects("Pod")) == 30  # last known state keeps being served


def test_forbidden_cluster_wide_list_falls_back_to_namespaced_reads(
    api: FakeApiServer, kubeconfig: str
) -> None:
    seed(api)
    api.apply(
        {
            "kind": "ResourceQuota",
            "apiVersion": "v1",
            "metadata": {"name": "gpu", "namespace": "team-0"},
            "spec": {"hard": {"requests.nvidia.com/gpu": "4"}},
        }
    )
    api.forbidden |= {("resourcequotas", None), ("resourcequotas", "team-1")}
    client_api, name = load_client(kubeconfig=kubeconfig)
    src = CachedSource(RawClient(client_api, cluster_name=name), watch_timeout=5)
    try:
        assert src.start().wait_synced(10)
        assert [
            q["metadata"]["name"] for q in src.objects("ResourceQuota", namespace="team-0")
        ] == ["gpu"]
        with pytest.raises(ForbiddenError, match="cannot list resourcequotas in namespace team-1"):
            src.objects("ResourceQuota", namespace="team-1")
    finally:
        src.close()


def test_registry_keeps_one_cache_per_context(tmp_path: Path) -> None:
    with FakeApiServer([node("a-node")]) as a, FakeApiServer([node("b-node")]) as b:
        cfg = json.loads(a.write_kubeconfig(tmp_path / "a", context="alpha").read_text())
        other = json.loads(b.write_kubeconfig(tmp_path / "b", context="beta").read_text())
        for section in ("clusters", "users", "contexts"):
            cfg[section] += other[section]
        path = tmp_path / "kubeconfig"
        path.write_text(json.dumps(cfg))
        registry = ClusterRegistry(kubeconfig=str(path))
        try:
            default = registry.source()
            assert default.cluster_name == "alpha"
            assert registry.source("alpha") is default
            beta = registry.source("beta")
            assert [n["metadata"]["name"] for n in beta.objects("Node")] == ["b-node"]
            assert [n["metadata"]["name"] for n in default.objects("Node")] == ["a-node"]
            assert registry.names() == ["alpha", "beta"]
            with pytest.raises(ConfigError, match="context 'gamma' not found"):
                registry.source("gamma")
        finally:
            registry.close()


def test_usage_index_equals_recomputation() -> None:
    from triage.cluster.usage import UsageIndex

    index = UsageIndex()
    pods: dict[str, Obj] = {}
    index.replace([])
    for step in range(60):
        name = f"p{step % 7}"
        new = pod(
            name,
            node_name=f"n{step % 3}",
            gpus=step % 4,
            phase="Succeeded" if step % 5 == 0 else "Running",
            selector={},
        )
        index.change(pods.get(name), new)
        pods[name] = new
        if step % 11 == 0:
            index.change(pods.pop(name), None)
    expected: dict[str, NodeUsage] = dict(MemorySource(pods.values()).node_usage())
    assert usage_view(index.snapshot()) == usage_view(expected)


def test_unreachable_cluster_fails_fast_not_after_the_sync_timeout(tmp_path: Path) -> None:
    with FakeApiServer() as gone:
        path = gone.write_kubeconfig(tmp_path / "kubeconfig")
    client_api, name = load_client(kubeconfig=str(path))
    src = CachedSource(RawClient(client_api, cluster_name=name), sync_timeout=30)
    started = time.monotonic()
    try:
        with pytest.raises(UnavailableError, match="cannot reach the Kubernetes API"):
            src.objects("Node")
        assert time.monotonic() - started < 5
    finally:
        src.close()


def scrape(cache: CachedSource) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """/metrics of a bot serving `cache` as cluster "fake", parsed: (name, labels) -> value."""
    from prometheus_client.parser import text_string_to_metric_families

    from gpu_triage.metrics import Metrics

    body, _ = Metrics(caches=lambda: {"fake": cache}).render()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(body.decode())
        for s in family.samples
    }


def kind_labels(kind: str, **extra: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted({"cluster": "fake", "kind": kind, **extra}.items()))


def test_metrics_show_each_watch_and_what_it_holds(api: FakeApiServer, cache: CachedSource) -> None:
    m = scrape(cache)
    assert m[("gpu_triage_cluster_cache_objects", kind_labels("Pod"))] == 30
    assert m[("gpu_triage_cluster_cache_objects", kind_labels("Node"))] == 4
    assert m[("gpu_triage_cluster_cache_watch_state", kind_labels("Pod", state="synced"))] == 1
    assert m[("gpu_triage_cluster_cache_watch_state", kind_labels("Pod", state="failing"))] == 0
    assert m[("gpu_triage_cluster_cache_watch_down_seconds", kind_labels("Pod"))] == 0
    assert m[("gpu_triage_cluster_cache_relists_total", kind_labels("Pod"))] == 0
    # Every kind synced by the watch-list protocol, then watched: no list page was needed.
    assert m[("gpu_triage_cluster_api_watches_total", (("cluster", "fake"),))] >= 2 * len(
        cache.health()
    )
    assert m[("gpu_triage_cluster_api_requests_total", (("cluster", "fake"),))] == 0

    api.stop()
    wait_for(lambda: any(k.kind == "Pod" and k.state == "failing" for k in cache.health()))
    time.sleep(0.01)
    m = scrape(cache)
    assert m[("gpu_triage_cluster_cache_watch_state", kind_labels("Pod", state="failing"))] == 1
    assert m[("gpu_triage_cluster_cache_watch_down_seconds", kind_labels("Pod"))] > 0
    assert m[("gpu_triage_cluster_cache_objects", kind_labels("Pod"))] == 30  # still served


def test_metrics_tell_a_forbidden_kind_from_a_broken_watch(
    api: FakeApiServer, kubeconfig: str
) -> None:
    api.forbidden |= {("resourcequotas", None)}
    client_api, name = load_client(kubeconfig=kubeconfig)
    src = CachedSource(RawClient(client_api, cluster_name=name), watch_timeout=5)
    try:
        assert src.start().wait_synced(10)
        m = scrape(src)
        quota = kind_labels("ResourceQuota", state="forbidden")
        assert m[("gpu_triage_cluster_cache_watch_state", quota)] == 1
        assert m[("gpu_triage_cluster_cache_watch_down_seconds", kind_labels("ResourceQuota"))] == 0
        assert m[("gpu_triage_cluster_cache_watch_state", kind_labels("Node", state="synced"))] == 1
    finally:
        src.close()


def _owned(name: str, job: str, *, phase: str = "Running", ns: str = "team-0") -> Obj:
    p = pod(
        name,
        node_name="n0" if phase == "Running" else None,
        gpus=1,
        ns=ns,
        phase=phase,
        selector={},
    )
    p["metadata"]["ownerReferences"] = [{"kind": "Job", "name": job, "controller": True}]
    return p


def indexes_of(src: object) -> tuple[list[str], list[str], list[str]]:
    """A Job's pods, the troubled pods of one namespace and of the whole cluster."""
    from triage.cluster.indexes import owned_pods, troubled_pods

    def names(objs: list[Obj]) -> list[str]:
        return sorted(f"{o['metadata']['namespace']}/{o['metadata']['name']}" for o in objs)

    return (
        names(owned_pods(src, namespace="team-0", owners=[("Job", "train")])),
        names(troubled_pods(src, namespace="team-0")),
        names(troubled_pods(src, namespace=None)),
    )


def test_indexes_follow_the_watch_and_relists(
    api: FakeApiServer, cache: CachedSource, kubeconfig: str
) -> None:
    """The Job -> pods and troubled-pods indexes answer what a scan of a fresh list answers,
    through adds, updates, deletes and a relist, whether built before or after them."""
    api.apply(_owned("train-a", "train"))
    api.apply(_owned("train-b", "train", phase="Pending"))
    wait_for(lambda: cache.get("Pod", "train-b", namespace="team-0") is not None)

    def agrees() -> bool:
        return indexes_of(cache) == indexes_of(MemorySource(fresh(kubeconfig).objects("Pod")))

    assert indexes_of(cache) == (
        ["team-0/train-a", "team-0/train-b"], ["team-0/train-b"], ["team-0/train-b"]
    )  # fmt: skip
    api.apply(_owned("train-a", "train", phase="Pending"))  # evicted, waiting again
    api.apply(_owned("train-c", "train", phase="Pending", ns="team-1"))  # other namespace
    api.delete("Pod", "train-b", namespace="team-0")
    api.apply(_owned("other", "eval"))
    wait_for(agrees)
    assert indexes_of(cache)[0] == ["team-0/train-a"]
    assert indexes_of(cache)[2] == ["team-0/train-a", "team-1/train-c"]
    api.apply(_owned("missed", "train", phase="Pending"), record=False)  # only a relist sees it
    api.compact()
    api.drop_watches()
    wait_for(lambda: cache._informers["Pod"].relists >= 1)
    wait_for(agrees)
    assert "team-0/missed" in indexes_of(cache)[0]


def test_an_index_built_while_the_watch_applies_changes_misses_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first `indexed` call builds the index off the informer's lock; changes the watch
    applies meanwhile are caught up before the index is used."""
    import kube.informer as informer_mod
    from triage.cluster.indexes import POD_OWNER
    from triage.cluster.source import KINDS

    inf = informer_mod.Informer(None, KINDS["Pod"])  # type: ignore[arg-type]
    for name in ("a", "b"):
        inf._apply({"type": "ADDED", "object": _owned(f"train-{name}", "train")})
    real = informer_mod.Index

    class Slow(real):  # type: ignore[misc,valid-type]
        def __init__(self, *args: object) -> None:
            super().__init__(*args)
            if not getattr(Slow, "done", False):  # the watch moves on during the build
                Slow.done = True
                inf._apply({"type": "ADDED", "object": _owned("train-c", "train")})
                inf._apply({"type": "DELETED", "object": _owned("train-a", "train")})

    monkeypatch.setattr(informer_mod, "Index", Slow)
    got = inf.indexed(POD_OWNER, ("team-0", "Job", "train"))
    assert sorted(p["metadata"]["name"] for p in got) == ["train-b", "train-c"]


def test_the_store_answers_as_a_plain_dict_would_through_adds_changes_and_deletes() -> None:
    """400 random watch events over three namespaces (one emptied and filled again): every
    read (`get`, `items` of all and of each namespace, `len` and `count`, an index) equals a
    dict of the same objects."""
    import random

    import kube.informer as informer_mod
    from triage.cluster.indexes import BY_NAME, POD_OWNER
    from triage.cluster.source import KINDS

    rnd = random.Random(5)
    inf = informer_mod.Informer(None, KINDS["Pod"])  # type: ignore[arg-type]
    held: dict[tuple[str, str], str] = {}  # (namespace, name) -> owner
    namespaces = ("team-0", "team-1", "ops")
    assert inf.indexed(POD_OWNER, ("team-0", "Job", "a")) == []  # built now, kept current
    for _ in range(400):
        ns, name = rnd.choice(namespaces), f"p{rnd.randrange(12)}"
        if rnd.random() < 0.35:
            etype = "DELETED"
            owner = held.pop((ns, name), "gone")
        else:
            etype = "MODIFIED" if (ns, name) in held else "ADDED"
            owner = held[(ns, name)] = rnd.choice(["a", "b", name])
        inf._apply({"type": etype, "object": _owned(name, owner, ns=ns)})
        assert len(inf) == inf.count() == len(held)
        for n in (*namespaces, "nowhere"):
            assert inf.count(n) == sum(k[0] == n for k in held)
        # what a sweep asks of many keys at once: whether the index files anything under each
        owners = [(n, "Job", o) for n in (*namespaces, "nowhere") for o in ("a", "b", name)]
        named = [(n, name) for n in namespaces] + [("team-0",), "p1", (ns, name, "x")]
        assert inf.filed(BY_NAME, named) == [bool(inf.indexed(BY_NAME, k)) for k in named]
        assert inf.filed(POD_OWNER, owners) == [bool(inf.indexed(POD_OWNER, k)) for k in owners]
        assert inf.filed(POD_OWNER, owners) == [
            any(k[0] == n and o == owned for k, owned in held.items()) for n, _, o in owners
        ]

    def names(objs: list[Obj]) -> list[tuple[str, str]]:
        return sorted((o["metadata"]["namespace"], o["metadata"]["name"]) for o in objs)

    assert names(inf.items()) == sorted(held)
    for ns in (*namespaces, "nowhere"):
        assert names(inf.items(ns)) == sorted(k for k in held if k[0] == ns)
    for ns in namespaces:
        for i in range(12):
            got = inf.get(ns, f"p{i}")
            assert (got is not None) == ((ns, f"p{i}") in held)
            assert inf.indexed(BY_NAME, (ns, f"p{i}")) == ([] if got is None else [got])
        for owner in ("a", "b"):
            want = sorted(k for k, o in held.items() if k[0] == ns and o == owner)
            assert names(inf.indexed(POD_OWNER, (ns, "Job", owner))) == want
    for k in list(held):  # every namespace emptied: nothing is left behind
        inf._apply({"type": "DELETED", "object": _owned(k[1], held.pop(k), ns=k[0])})
    assert len(inf) == 0 and inf.items() == [] and inf._by_ns == {}


def test_the_jobs_wanting_pods_follow_the_watch() -> None:
    """The index of Jobs that want pods a sweep reads (`WORKLOAD_OPEN`), built and then kept
    through 200 random watch events (Jobs made, finished, scaled to zero, suspended, deleted;
    pods of some of them made and deleted): always the Jobs of the store that want pods, and
    those without a pod the ones `unmatched` finds against the pods' owner index."""
    import random

    import kube.informer as informer_mod
    from triage.cluster.indexes import POD_OWNER, WORKLOAD_OPEN
    from triage.cluster.objects import wants_pods
    from triage.cluster.source import KINDS

    def key(name: str) -> tuple[str, str, str]:
        return ("team-0", "Job", name)

    rnd = random.Random(11)
    inf = informer_mod.Informer(None, KINDS["Job"])  # type: ignore[arg-type]
    pods = informer_mod.Informer(None, KINDS["Pod"])  # type: ignore[arg-type]
    assert inf.indexed(WORKLOAD_OPEN, key("j0")) == []
    assert inf.unmatched(WORKLOAD_OPEN, pods, POD_OWNER) == []
    held: set[str] = set()
    owned: set[str] = set()  # the Jobs a pod is made for (p-<job>)
    mixed = 0
    for _ in range(200):
        name = f"j{rnd.randrange(10)}"
        job = {"apiVersion": "batch/v1", "kind": "Job",
               "metadata": {"name": name, "namespace": "team-0"},
               "spec": {"parallelism": rnd.choice((0, 1)), "suspend": rnd.random() < 0.3,
                        "template": {"spec": pod("x")["spec"]}},
               "status": {"conditions": [{"type": "Complete", "status": "True"}]
                          if rnd.random() < 0.4 else []}}  # fmt: skip
        if rnd.random() < 0.2:
            etype = "DELETED"
            held.discard(name)
        else:
            etype = "MODIFIED" if name in held else "ADDED"
            held.add(name)
        inf._apply({"type": etype, "object": job})
        if rnd.random() < 0.5:  # a pod of a Job made or deleted (its Job may not exist)
            of = f"j{rnd.randrange(10)}"
            gone = of in owned and rnd.random() < 0.5
            pods._apply({"type": "DELETED" if gone else "MODIFIED" if of in owned else "ADDED",
                         "object": _owned(f"p-{of}", of)})  # fmt: skip
            (owned.discard if gone else owned.add)(of)
        want = sorted(o["metadata"]["name"] for o in inf.items() if wants_pods(o))
        assert [n for n in sorted(held) if inf.indexed(WORKLOAD_OPEN, key(n))] == want
        podless = inf.unmatched(WORKLOAD_OPEN, pods, POD_OWNER)
        assert sorted(o["metadata"]["name"] for o in podless) == sorted(set(want) - owned)
        mixed += 0 < len(podless) < len(want)  # some wanting Jobs with pods, some without
    assert 0 < len(want) < len(held)
    assert mixed > 20


def test_a_heartbeat_keeps_the_cached_node_and_a_real_change_replaces_it(
    api: FakeApiServer, cache: CachedSource
) -> None:
    """Kubelets rewrite their node's heartbeat times every few minutes: the cache keeps the
    object it holds (everything remembered by its identity stays valid), and still takes
    every change the engine reads."""
    beat = node("n1")
    beat["status"]["conditions"] = [
        {"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-12-05T10:00:00Z"}
    ]
    api.apply(beat)
    first = str(api.rv)
    wait_for(lambda: cache.resource_version("Node") == first)
    held = cache.get("Node", "n1")
    beat["status"]["conditions"][0]["lastHeartbeatTime"] = "2026-12-05T10:05:00Z"
    api.apply(beat)
    rv = str(api.rv)
    wait_for(lambda: cache.resource_version("Node") == rv)
    assert cache.get("Node", "n1") is held
    beat["spec"]["unschedulable"] = True
    api.apply(beat)
    wait_for(lambda: (cache.get("Node", "n1") or {}).get("spec", {}).get("unschedulable"))
    assert cache.get("Node", "n1") is not held


def test_a_list_is_handed_out_again_until_something_in_it_changes(
    api: FakeApiServer, cache: CachedSource
) -> None:
    """Readers get one list per kind and namespace while nothing in it changed (what lets a
    warm triage skip comparing 5,000 nodes); a change anywhere in it gives a new list with
    the change, and leaves the lists handed out before as they were."""
    nodes, team0, team1 = (
        cache.objects("Node"),
        cache.objects("Pod", namespace="team-0"),
        cache.objects("Pod", namespace="team-1"),
    )
    every_pod = cache.objects("Pod")
    assert cache.objects("Node") is nodes and cache.objects("Pod") is every_pod
    api.apply(pod("late", node_name="n1", gpus=1, ns="team-0", phase="Running", selector={}))
    wait_for(lambda: cache.objects("Pod", namespace="team-0") is not team0)
    assert "late" in {p["metadata"]["name"] for p in cache.objects("Pod", namespace="team-0")}
    assert "late" not in {p["metadata"]["name"] for p in team0}
    assert len(cache.objects("Pod")) == len(every_pod) + 1
    assert cache.objects("Pod", namespace="team-1") is team1  # another namespace: untouched
    assert cache.objects("Node") is nodes
    api.delete("Node", "n3")
    wait_for(lambda: cache.objects("Node") is not nodes)
    assert "n3" in {n["metadata"]["name"] for n in nodes}
    assert "n3" not in {n["metadata"]["name"] for n in cache.objects("Node")}


def test_the_environment_proxy_is_kept_for_the_cluster_it_was_resolved_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The proxy is looked up once, at load: later requests (which re-assign the host in the
    client's token refresh) keep it, and a cluster NO_PROXY exempts stays direct."""
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:3128")
    monkeypatch.setenv("NO_PROXY", "127.0.0.2")
    kc = write_kubeconfig("http://127.0.0.1:6443", tmp_path / "kc", context="c")
    api, _ = load_client(kubeconfig=str(kc))
    assert api.configuration.proxy == "http://127.0.0.1:3128"
    assert api.configuration.no_proxy == "127.0.0.2"
    monkeypatch.delenv("HTTP_PROXY")
    api.configuration.host = "http://127.0.0.1:6443"
    assert api.configuration.proxy == "http://127.0.0.1:3128"


def test_a_server_without_the_watch_list_protocol_is_listed_page_by_page(
    api: FakeApiServer, kubeconfig: str
) -> None:
    """An API server with the WatchList feature off (or older than 1.27) refuses
    sendInitialEvents with 422: the cache lists instead, asks no more, and converges."""
    api.watch_list = False
    seed(api)
    client_api, name = load_client(kubeconfig=kubeconfig)
    src = CachedSource(
        RawClient(client_api, cluster_name=name), watch_timeout=5, max_backoff=0.2, stale_after=0
    )
    try:
        assert src.start().wait_synced(10)
        assert same_as_fresh_list(src, kubeconfig)
        assert src.stats()["synced_by_watch_list"] == 0 and src.stats()["api_requests"] > 0
        api.apply(pod("missed", node_name="n0", gpus=8, phase="Running", selector={}), record=False)
        api.compact()
        api.drop_watches()  # the informer relists: by list, without asking for a stream again
        wait_for(lambda: src._informers["Pod"].relists >= 1)
        wait_for(lambda: same_as_fresh_list(src, kubeconfig))
        streams = [q for p, q in api.requests if p == "/api/v1/pods" and "sendInitialEvents" in q]
        assert len(streams) == 1
    finally:
        src.close()


def test_the_watch_list_stream_syncs_every_kind_and_a_relist_streams_again(
    api: FakeApiServer, cache: CachedSource, kubeconfig: str
) -> None:
    assert cache.stats()["synced_by_watch_list"] == len(cache.health())
    assert not [p for p, q in api.requests if "watch" not in q]  # not one list page
    api.apply(pod("missed", node_name="n0", gpus=8, phase="Running", selector={}), record=False)
    api.compact()
    api.drop_watches()
    wait_for(lambda: cache._informers["Pod"].relists >= 1)
    wait_for(lambda: same_as_fresh_list(cache, kubeconfig))
    streams = [q for p, q in api.requests if p == "/api/v1/pods" and "sendInitialEvents" in q]
    assert len(streams) >= 2


@pytest.mark.parametrize("ends", ["stream closes", "stream falls silent"])
def test_a_stream_without_its_closing_bookmark_falls_back_to_a_list(
    api: FakeApiServer, kubeconfig: str, monkeypatch: pytest.MonkeyPatch, ends: str
) -> None:
    """A server that takes the parameters but never says the initial state is complete
    (a plain watch: every object, then it waits for changes) is listed once its stream ends
    or falls silent; nothing is applied twice."""
    if ends == "stream closes":
        monkeypatch.setattr(kube.lists, "WATCH_LIST_TIMEOUT", 1)
    else:
        monkeypatch.setattr(kube.lists, "WATCH_LIST_IDLE", 1)
    api.watch_list = None
    seed(api)
    client_api, name = load_client(kubeconfig=kubeconfig)
    kinds = ("Pod", "Node", "ResourceQuota")  # no quota: a stream with no object at all
    src = CachedSource(RawClient(client_api, cluster_name=name), kinds=kinds)
    try:
        assert src.start().wait_synced(10)
        assert src.stats()["synced_by_watch_list"] == 0
        assert src.objects("ResourceQuota") == []
        assert len(src.objects("Pod")) == 30 and same_as_fresh_list(src, kubeconfig)
    finally:
        src.close()


def test_a_synced_cache_warms_up_so_the_first_triage_judges_no_node_again(
    api: FakeApiServer, kubeconfig: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The bot's warm-up (`on_synced=triage.prepare`) runs once every kind has synced: every
    node's health and the node classes of each waiting pod's shape are then in the cache's
    memo, and the first triage reassesses no node and groups none again."""
    import triage.layers.health as health
    from triage import prepare, triage
    from triage.engine import Prepared
    from triage.layers.scheduling import by_class

    seed(api)
    api.apply(pod("waiting", ns="team-0", gpus=8, selector={}))
    judged: list[str] = []
    assess = health.assess_node
    monkeypatch.setattr(
        health,
        "assess_node",
        lambda node, *a, **k: judged.append(node["metadata"]["name"]) or assess(node, *a, **k),
    )
    grouped: list[tuple[str, ...]] = []
    groups = by_class.node_groups
    monkeypatch.setattr(
        by_class,
        "node_groups",
        lambda nodes, healths, keys: grouped.append(keys) or groups(nodes, healths, keys),
    )
    warmed: list[Prepared] = []
    client_api, name = load_client(kubeconfig=kubeconfig)
    src = CachedSource(
        RawClient(client_api, cluster_name=name),
        watch_timeout=5,
        on_synced=lambda cache: warmed.append(prepare(cache)),
    ).start()
    try:
        wait_for(lambda: bool(warmed))
        assert warmed == [Prepared(nodes=4, shapes=1)] and sorted(judged) == [
            "n0",
            "n1",
            "n2",
            "n3",
        ]
        assert len(grouped) == 1  # the waiting pod's node classes
        judged.clear()
        report = triage(src, namespace="team-0", name="waiting")
        assert report.failing_layer is not None and judged == [] and len(grouped) == 1
    finally:
        src.close()


def test_a_failing_warm_up_is_logged_and_the_cache_serves_on(
    api: FakeApiServer, kubeconfig: str, caplog: pytest.LogCaptureFixture
) -> None:
    seed(api)

    def broken(_: CachedSource) -> None:
        raise RuntimeError("boom")

    client_api, name = load_client(kubeconfig=kubeconfig)
    src = CachedSource(
        RawClient(client_api, cluster_name=name), watch_timeout=5, on_synced=broken
    ).start()
    try:
        assert src.wait_synced(10)
        wait_for(lambda: "warm-up after the sync failed" in caplog.text)
        assert len(src.objects("Pod")) == 30
    finally:
        src.close()


def test_a_pod_the_watch_adds_shares_its_spec_with_its_listed_siblings(
    api: FakeApiServer, kubeconfig: str
) -> None:
    """Pods of one workload on one node, each with its own token volume mounted in its
    container as every pod has: the one the watch adds after the sync holds the very spec its
    listed sibling holds (decoded as list pages are), and the watch still tracks where it got
    to (a pod's resourceVersion) and applies a change and a delete."""

    def replica(name: str) -> Obj:
        made = pod(name, node_name="n1", gpus=1, ns="team-0", phase="Running", selector={})
        token = f"kube-api-access-{name}"
        made["spec"]["volumes"] = [{"name": token, "projected": {"sources": []}}]
        made["spec"]["containers"][0]["volumeMounts"] = [{"name": token, "mountPath": "/run"}]
        return made

    api.apply(node("n1"))
    api.apply(replica("w-0"))
    client_api, name = load_client(kubeconfig=kubeconfig)
    src = CachedSource(RawClient(client_api, cluster_name=name), watch_timeout=5, stale_after=0)
    src.start()
    try:
        assert src.wait_synced(10)
        api.apply(replica("w-1"))
        rv = str(api.rv)
        wait_for(lambda: src.resource_version("Pod") == rv)
        listed, added = (
            src.get("Pod", "w-0", namespace="team-0"),
            src.get("Pod", "w-1", namespace="team-0"),
        )
        assert listed is not None and added is not None
        assert added["spec"] is listed["spec"]
        finished = replica("w-1")
        finished["status"]["phase"] = "Failed"
        api.apply(finished)
        wait_for(
            lambda: (
                (src.get("Pod", "w-1", namespace="team-0") or {}).get("status", {}).get("phase")
                == "Failed"
            )
        )
        api.delete("Pod", "w-0", namespace="team-0")
        wait_for(lambda: src.get("Pod", "w-0", namespace="team-0") is None)
    finally:
        src.close()


def test_a_stream_read_in_batches_keeps_every_object_in_order(
    api: FakeApiServer, kubeconfig: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The initial events are decoded a batch of bytes at a time (`STREAM_BATCH`): with a
    batch of a few objects, the stream's last partial batch is applied at its bookmark, and
    the cache holds what a list holds."""
    monkeypatch.setattr(kube.lists, "STREAM_BATCH", 5000)
    seed(api)
    client_api, name = load_client(kubeconfig=kubeconfig)
    src = CachedSource(RawClient(client_api, cluster_name=name), kinds=("Pod", "Node", "Namespace"))
    try:
        assert src.start().wait_synced(10)
        assert src.stats()["synced_by_watch_list"] == 3
        assert same_as_fresh_list(src, kubeconfig)
        api.apply(pod("late", node_name="n1", gpus=1, phase="Running", selector={}))
        wait_for(lambda: src.get("Pod", "late", namespace="team-a") is not None)
    finally:
        src.close()


def _events(*types: str) -> list[bytes]:
    return [
        json.dumps({"type": t, "object": {"metadata": {"name": f"o{i}"}}}).encode()
        for i, t in enumerate(types)
    ]


def test_batched_lines_wait_for_no_byte_after_a_bookmark(monkeypatch: pytest.MonkeyPatch) -> None:
    """Added objects' events are held until a batch is full; any other event lets them go at
    once and comes right after them, without reading on: after the closing bookmark the
    server sends nothing until something changes."""
    monkeypatch.setattr(kube.lists, "STREAM_BATCH", 10**6)
    lines = _events("ADDED", "ADDED", "BOOKMARK")
    read_past: list[bytes] = []

    def stream() -> Iterator[bytes]:
        yield from lines
        read_past.append(b"a change, much later")
        yield read_past[-1]

    got = []
    for line in kube.lists._batched(stream()):
        got.append(line)
        if b"BOOKMARK" in line:
            break
    assert got == lines
    assert not read_past


def test_batched_lines_keep_their_order_and_go_before_a_cut(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(kube.lists, "STREAM_BATCH", 100)  # two events a batch
    lines = _events("ADDED", "ADDED", "ADDED", "ERROR", "ADDED", "ADDED", "ADDED")

    def cut() -> Iterator[bytes]:
        yield from lines
        raise UnavailableError("watch on pods dropped")

    got = []
    with pytest.raises(UnavailableError):
        for line in kube.lists._batched(cut()):
            got.append(line)
    assert got == lines


def _job(name: str, *, parallelism: int = 1, done: bool = False) -> Obj:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": "team-0", "uid": f"uid-{name}"},
            "spec": {"parallelism": parallelism, "template": {"spec": pod("x")["spec"]}},
            "status": {"conditions": [{"type": "Complete", "status": "True"}]
                       if done else []}}  # fmt: skip


def test_a_sweep_through_the_cache_lists_no_job_after_a_change(
    api: FakeApiServer, kubeconfig: str
) -> None:
    """A sweep asks the cache how many of each owner kind it holds (`count`) and finds pods'
    owners and podless Jobs by its indexes: after a Job changes, no list of every Job is made
    again (a batch cluster's: 565,000 Jobs at 20,000 nodes), and the sweep finds what one over
    the same objects in memory finds. An owner kind the credentials cannot list is still said."""
    from triage.fleet import sweep
    from triage.fleet.stuck import stuck_workloads

    api.forbidden.add(("deployments", None))  # before the cache starts: never synced
    seed(api)
    api.apply(pod("waiting-0", ns="team-0", owner=("Job", "waiting")))
    api.apply(pod("orphan", ns="team-0", owner=("Job", "gone")))
    for made in ("waiting", "held", "done"):
        api.apply(_job(made, done=made == "done"))
    client_api, cluster = load_client(kubeconfig=kubeconfig)
    cache = CachedSource(RawClient(client_api, cluster_name=cluster), watch_timeout=5)
    cache.start()
    try:
        assert cache.wait_synced(10)
        api.apply(_job("held", parallelism=2))  # a change: the Job list handed out is dropped
        rv = str(api.rv)
        wait_for(lambda: cache.resource_version("Job") == rv)
        jobs = cache._informers["Job"]
        assert jobs.count() == 2 and jobs.aside_of("team-0", "done") == "done"  # finished
        assert cache.count("Job") == 3 and cache.count("Job", namespace="team-0") == 3
        assert cache.count("Job", namespace="team-1") == 0 and cache.count("Node") == 4
        assert cache.count("Deployment") is None  # not cached: the caller lists (refused)
        assert None not in jobs._lists

        result = sweep(cache)
        assert None not in jobs._lists  # nor made by the sweep
        found = {(m.kind, m.name) for g in result.groups for m in g.members}
        found |= {(m.kind, m.name) for m in [*result.waiting, *result.unknown]}
        assert found == {("Job", "waiting"), ("Job", "held"), ("Pod", "orphan")}
        assert any(line.startswith("cannot list deployments") for line in result.unread)

        copy = MemorySource(
            [o for kind in ("Node", "Pod", "Job", "Namespace") for o in cache.objects(kind)]
        )
        assert stuck_workloads(cache, unread=[]) == stuck_workloads(copy)
    finally:
        cache.close()


def _job_pod(job: Obj, suffix: str) -> Obj:
    """A pod of `job` as the Job controller makes it: its name and uid in four labels and in
    its owner reference."""
    name, uid = job["metadata"]["name"], job["metadata"]["uid"]
    labels = {"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": name,
              "controller-uid": uid, "job-name": name, "team": "vision"}  # fmt: skip
    made = pod(f"{name}-{suffix}", ns="team-0", node_name="n0", phase="Running", labels=labels)
    made["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": name,
            "uid": uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    return made


def test_a_jobs_pods_hold_the_jobs_own_name_and_uid(api: FakeApiServer, kubeconfig: str) -> None:
    """The pods are listed once the Jobs are cached, so that a Job's pods hold its name and
    uid strings, not equal copies (137 bytes a pod of a batch cluster): the listed pods, those
    of a Job with two, and a pod the watch adds later. What the cache holds is what a fresh
    list projects, as before; a pod whose Job was made again under its name (another uid)
    keeps its own uid."""
    api.apply(node("n0"))
    jobs = [_job(f"train-{i}") for i in range(6)]
    for job in jobs:
        api.apply(job)
        api.apply(_job_pod(job, "a1b2c"))
    api.apply(_job_pod(jobs[2], "x9y8z"))  # two pods
    remade = _job("train-9")
    api.apply(_job_pod({"metadata": remade["metadata"] | {"uid": "old"}}, "q"))
    api.apply(remade)  # made again under its name: another uid than its pod's
    client_api, cluster = load_client(kubeconfig=kubeconfig)
    cache = CachedSource(RawClient(client_api, cluster_name=cluster), watch_timeout=5)
    cache.start()
    try:
        assert cache.wait_synced(10)
        late = _job("late")
        api.apply(late)
        rv = str(api.rv)
        wait_for(lambda: cache.resource_version("Job") == rv)
        api.apply(_job_pod(late, "l4t3r"))
        rv = str(api.rv)
        wait_for(lambda: cache.resource_version("Pod") == rv)

        held = cache.objects("Pod", namespace="team-0")
        assert len(held) == 9
        for p in held:
            job = cache.get("Job", p["metadata"]["ownerReferences"][0]["name"], namespace="team-0")
            assert job is not None
            name, uid = job["metadata"]["name"], job["metadata"]["uid"]
            labels = p["metadata"]["labels"]
            assert p["metadata"]["ownerReferences"][0]["name"] is name
            assert labels["job-name"] is name and labels["batch.kubernetes.io/job-name"] is name
            if p["metadata"]["name"] == "train-9-q":
                assert labels["controller-uid"] == "old" and uid == "uid-train-9"
                continue
            assert labels["controller-uid"] is uid
            assert labels["batch.kubernetes.io/controller-uid"] is uid
        live = fresh(kubeconfig)
        want = sorted(json.dumps(projection("Pod")(o), sort_keys=True) for o in live.objects("Pod"))
        assert sorted(json.dumps(o, sort_keys=True) for o in cache.objects("Pod")) == want
    finally:
        cache.close()


def _jobs_with_a_pod(api: FakeApiServer, count: int) -> list[Obj]:
    """A node, and `count` Jobs each with its pod (`train-N-a1b2c`) on it."""
    api.apply(node("n0"))
    jobs = [_job(f"train-{i}") for i in range(count)]
    for job in jobs:
        api.apply(job)
        api.apply(_job_pod(job, "a1b2c"))
    return jobs


def _shares_its_jobs_strings(cache: CachedSource, pod_name: str) -> None:
    p = cache.get("Pod", pod_name, namespace="team-0")
    assert p is not None
    job = cache.get("Job", p["metadata"]["ownerReferences"][0]["name"], namespace="team-0")
    assert job is not None
    name, uid, labels = job["metadata"]["name"], job["metadata"]["uid"], p["metadata"]["labels"]
    assert p["metadata"]["ownerReferences"][0]["name"] is name
    assert labels["batch.kubernetes.io/job-name"] is name and labels["job-name"] is name
    assert labels["batch.kubernetes.io/controller-uid"] is uid and labels["controller-uid"] is uid


def test_a_jobs_new_versions_keep_the_strings_its_pods_hold(
    api: FakeApiServer, kubeconfig: str
) -> None:
    """The Job controller writes a Job's status after its pods change (ready, done): the new
    version the watch brings holds the name and uid strings of the version cached, which the
    pods hold, not copies (else each pod of a live cluster soon holds its own again). So after
    a relist of every kind. A Job made again under its name keeps its own uid."""
    jobs = _jobs_with_a_pod(api, 3)
    client_api, cluster = load_client(kubeconfig=kubeconfig)
    cache = CachedSource(RawClient(client_api, cluster_name=cluster), watch_timeout=5)
    cache.start()
    try:
        assert cache.wait_synced(10)
        for job in jobs[:2]:  # its pod is ready: the controller says so
            api.apply(job | {"status": {"active": 1, "ready": 1}})
        rv = str(api.rv)
        wait_for(lambda: cache.resource_version("Job") == rv)
        held = cache.get("Job", "train-0", namespace="team-0")
        assert held is not None and held["status"]["ready"] == 1
        for i in range(3):
            _shares_its_jobs_strings(cache, f"train-{i}-a1b2c")

        jobs_informer = cache._informers["Job"]
        api.apply(_job("missed"), record=False)  # the watch never hears of it: a relist does
        api.compact()
        api.drop_watches()
        wait_for(lambda: cache.get("Job", "missed", namespace="team-0") is not None)
        assert jobs_informer.relists >= 1
        for i in range(3):
            _shares_its_jobs_strings(cache, f"train-{i}-a1b2c")

        remade = jobs[2] | {"metadata": jobs[2]["metadata"] | {"uid": "uid-again"}}
        api.apply(remade)
        rv = str(api.rv)
        wait_for(lambda: cache.resource_version("Job") == rv)
        again = cache.get("Job", "train-2", namespace="team-0")
        assert again is not None and again["metadata"]["uid"] == "uid-again"
        kept = cache.get("Pod", "train-2-a1b2c", namespace="team-0")
        assert kept is not None
        assert kept["metadata"]["labels"]["controller-uid"] == "uid-train-2"
        assert kept["metadata"]["labels"]["job-name"] is again["metadata"]["name"]
    finally:
        cache.close()


def test_listed_by_pages_the_pods_do_not_wait_for_the_jobs_and_take_what_was_read(
    api: FakeApiServer, kubeconfig: str
) -> None:
    """Against a server without the watch-list protocol every list page waits on the server,
    and one list after the other took twice as long: the pods' list starts at once, and a
    slow Jobs list does not hold it back. Listed after the Jobs (here: the pods' list is the
    slow one), the pods hold the Jobs' own strings."""
    api.watch_list = False
    _jobs_with_a_pod(api, 4)
    client_api, cluster = load_client(kubeconfig=kubeconfig)
    api.slow["jobs"] = 2.0
    cache = CachedSource(RawClient(client_api, cluster_name=cluster), watch_timeout=5)
    cache.start()
    try:
        assert cache._informers["Pod"].synced.wait(1.5)
        assert not cache._informers["Job"].synced.is_set()
        assert cache.wait_synced(10)
    finally:
        cache.close()

    api.slow = {"pods": 1.0}
    cache = CachedSource(RawClient(client_api, cluster_name=cluster), watch_timeout=5)
    cache.start()
    try:
        assert cache.wait_synced(10)
        for i in range(4):
            _shares_its_jobs_strings(cache, f"train-{i}-a1b2c")
    finally:
        cache.close()


def test_a_pods_owner_is_found_among_the_jobs_read_so_far(kubeconfig: str) -> None:
    """While the Jobs' list is read, a pod's projection finds its Job among those it read so
    far (`Informer.listing`), and the cached one once it is the store's."""
    client_api, cluster = load_client(kubeconfig=kubeconfig)
    cache = CachedSource(RawClient(client_api, cluster_name=cluster))
    jobs = cache._informers["Job"]
    read = _job("train")
    assert cache._owner("Job", "team-0", "train") is None
    jobs.listing = {"team-0": {"train": read}}
    assert cache._owner("Job", "team-0", "train") is read
    assert cache._owner("Job", "team-1", "train") is None
    assert cache._owner("Job", "team-0", ["train"]) is None  # an odd name: nothing found
    assert cache._cached("Job", "team-0", "train") is None  # a Job's earlier self: stored only


def test_a_failing_job_list_holds_the_pods_back_no_longer_than_its_first_try(
    api: FakeApiServer, kubeconfig: str
) -> None:
    """The pods' first list waits for the Jobs' first list to end, not to succeed: with every
    request for Jobs refused, the pods are listed and served, and the Jobs once they answer."""
    seed(api)
    api.fail_on["jobs"] = 500
    client_api, cluster = load_client(kubeconfig=kubeconfig)
    cache = CachedSource(
        RawClient(client_api, cluster_name=cluster), watch_timeout=5, max_backoff=0.2
    )
    cache.start()
    try:
        pods = cache._informers["Pod"]
        assert pods.synced.wait(10)
        assert len(cache.objects("Pod")) == 30
        assert cache.status().state == "down" and "jobs" in cache.status().detail
        api.apply(_job("train"))
        del api.fail_on["jobs"]
        assert cache.wait_synced(10)
        assert cache.get("Job", "train", namespace="team-0") is not None
    finally:
        cache.close()


def test_few_malloc_arenas_leaves_the_operators_choice_and_other_c_libraries(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The bot asks glibc for two malloc arenas (a cache synced by list pages held 50 MB
    more at 5,000 nodes with one per thread), unless MALLOC_ARENA_MAX says otherwise; a C
    library without mallopt is left alone."""
    import kube.cache

    asked: list[tuple[int, int]] = []

    class Libc:
        def mallopt(self, param: int, value: int) -> int:
            asked.append((param, value))
            return 1

    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    monkeypatch.setattr("ctypes.CDLL", lambda name: Libc())
    assert kube.cache.few_malloc_arenas() is True
    assert asked == [(-8, 2)]  # M_ARENA_MAX

    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert kube.cache.few_malloc_arenas() is False
    assert asked == [(-8, 2)]

    monkeypatch.delenv("MALLOC_ARENA_MAX")
    monkeypatch.setattr("ctypes.CDLL", lambda name: object())  # no mallopt
    assert kube.cache.few_malloc_arenas() is False
