"""What a CLI command reads through the live source, and that reading less answers the same.

The live source reads each list once per command, answers a namespace's objects and single
objects from a cluster-wide list it read, starts what a command reads anyway in parallel,
and reads what the pods on a node request for the nodes a triage asks about. Every report
must be what a source holding every object gives: these tests compare them on every fixture
and on a synthetic cluster, served by the loopback fake API server.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bench.goldens import snapshots
from bench.synth import cluster
from kube.cache import CachedSource
from kube.client import RawClient, load_client
from kube.live import LiveSource, _owner_in, connect
from kube.live import connect as opened_by_kube
from kube.node_usage import NodeUsageReads
from kube.testing import FakeApiServer
from kube.workers import Workers
from tests.builders import OPNS, node, operator_pods, pod
from triage import triage
from triage.cluster.memory import MemorySource
from triage.cluster.snapshot import load_objects
from triage.cluster.source import ForbiddenError, by_namespace
from triage.fleet import stuck_workloads, sweep
from triage.render import report_data


@pytest.fixture(autouse=True)
def _closed(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every source a test opens with `connect` is closed after it: each holds a pool of
    connections, and hundreds of open sockets push later tests' servers past select()'s
    1,024 descriptors."""
    opened: list[LiveSource] = []

    def tracked(**kwargs: Any) -> LiveSource:
        opened.append(opened_by_kube(**kwargs))
        return opened[-1]

    monkeypatch.setattr(sys.modules[__name__], "connect", tracked)
    yield
    for source in opened:
        source.close()


NOW = datetime(2025, 6, 1, tzinfo=UTC)
ACTIVE = "status.phase!=Succeeded,status.phase!=Failed"
Obj = dict[str, Any]


class Listed(MemorySource):
    """Every object in memory, listed in the API server's order (by its storage key: the
    namespace, a slash, the name), and current (no snapshot time): what the live source must
    agree with."""

    def __init__(self, objs: list[Obj]) -> None:
        def order(o: Obj) -> str:
            return f"{o['metadata'].get('namespace') or ''}/{o['metadata']['name']}"

        super().__init__(json.loads(json.dumps(sorted(objs, key=order))), cluster_name="fake")

    @property
    def as_of(self) -> None:
        return None


def served(objs: list[Obj], tmp_path: Path) -> tuple[FakeApiServer, str]:
    api = FakeApiServer(json.loads(json.dumps(objs))).start()
    return api, str(api.write_kubeconfig(tmp_path / "kubeconfig", context="fake"))


def report(source: Any, ns: str, name: str) -> Obj:
    return report_data(triage(source, namespace=ns, name=name, now=NOW))


def pod_lists(api: FakeApiServer, since: int = 0) -> list[str]:
    """The field selectors of every cluster-wide pod list since request `since`."""
    return [q.get("fieldSelector", "") for p, q in api.requests[since:] if p == "/api/v1/pods"]


def daemonset(app: str) -> Obj:
    """A GPU Operator DaemonSet, so that its pods are read from its namespace alone."""
    tpl = {"metadata": {"labels": {"app": app}}, "spec": {"containers": [{"name": app}]}}
    return {"kind": "DaemonSet", "apiVersion": "apps/v1",
            "metadata": {"name": app, "namespace": OPNS, "labels": {"app": app}},
            "spec": {"selector": {"matchLabels": {"app": app}}, "template": tpl}}  # fmt: skip


def pool_cluster() -> list[Obj]:
    """100 busy GPU nodes, 10 of them in a small pool, and a pod pinned to that pool."""
    objs: list[Obj] = [daemonset(p["metadata"]["labels"]["app"]) for p in operator_pods("x")]
    for i in range(100):
        pool = "small" if i % 10 == 3 else "big"
        objs.append(node(f"n{i:02d}", extra_labels={"pool": pool}))
        objs += operator_pods(f"n{i:02d}")
        objs += [
            pod(f"run-{i:02d}-{j}", node_name=f"n{i:02d}", gpus=3, phase="Running", selector={})
            for j in range(2)
        ]
    objs.append(pod("pinned", gpus=4, selector={"pool": "small"}))
    objs.append(pod("anywhere", gpus=4, selector={}))
    return objs


def test_pod_pinned_to_a_small_pool_reads_its_pool_s_pods_only(tmp_path: Path) -> None:
    objs = pool_cluster()
    api, kubeconfig = served(objs, tmp_path)
    try:
        live = connect(kubeconfig=kubeconfig, read_ahead="triage")
        got = report(live, "team-a", "pinned")
        assert got == report(Listed(objs), "team-a", "pinned")
        assert sorted(pod_lists(api)) == [
            f"spec.nodeName=n{i:02d},{ACTIVE}" for i in range(3, 100, 10)
        ]
        usage = live.node_usage()
        assert isinstance(usage, NodeUsageReads)
        assert usage.nodes_read == 10 and not usage.whole
        # A pod that fits on any of the 100 nodes: one list of every active pod instead.
        before = len(api.requests)
        live = connect(kubeconfig=kubeconfig, read_ahead="triage")
        assert report(live, "team-a", "anywhere") == report(Listed(objs), "team-a", "anywhere")
        assert pod_lists(api, before) == [ACTIVE, ACTIVE]  # one list: 502 pods, two pages
    finally:
        api.stop()


def test_a_command_that_lists_every_pod_has_its_longer_default_deadline(tmp_path: Path) -> None:
    """Every pod of 20,000 nodes is 1,200 list pages: once a command lists them all (a pod
    that fits anywhere, a sweep), its default deadline is the wide one. A triage that reads
    its pool's pods keeps the short one, and a deadline the user gave stays as given."""
    api, kubeconfig = served(pool_cluster(), tmp_path)
    default = {"timeout": 120.0, "wide_timeout": 600.0}
    try:
        pinned = connect(kubeconfig=kubeconfig, read_ahead="triage", **default)
        report(pinned, "team-a", "pinned")
        anywhere = connect(kubeconfig=kubeconfig, read_ahead="triage", **default)
        report(anywhere, "team-a", "anywhere")
        swept = connect(kubeconfig=kubeconfig, read_ahead="sweep", **default)
        sweep(swept, now=NOW)
        given = connect(kubeconfig=kubeconfig, read_ahead="triage", timeout=120.0)
        report(given, "team-a", "anywhere")
    finally:
        api.stop()
    seconds = [s.client.deadline.seconds for s in (pinned, anywhere, swept, given)]
    assert seconds == [120.0, 600.0, 600.0, 120.0]


@pytest.mark.parametrize("path", snapshots(), ids=lambda p: p.name)
def test_live_reports_and_sweeps_equal_those_from_every_object(path: Path, tmp_path: Path) -> None:
    objs = load_objects(path)
    every = Listed(objs)
    api, kubeconfig = served(objs, tmp_path)
    try:
        for item in stuck_workloads(every):
            live = connect(kubeconfig=kubeconfig, read_ahead="triage")
            assert report(live, item.namespace, item.name) == report(
                every, item.namespace, item.name
            ), f"{item.namespace}/{item.name}"
        live = connect(kubeconfig=kubeconfig, read_ahead="sweep")
        want = sweep(every, now=NOW).model_dump()
        assert sweep(live, now=NOW).model_dump() == want
        # The bot's sweep: over the watch cache, its indexes asked many keys at once.
        api_client, name = load_client(kubeconfig=str(kubeconfig))
        cache = CachedSource(RawClient(api_client, cluster_name=name)).start()
        try:
            assert cache.wait_synced(10)
            assert sweep(cache, now=NOW).model_dump() == want
            for item in stuck_workloads(every):  # the bot's triage: over what the cache keeps
                assert report(cache, item.namespace, item.name) == report(
                    every, item.namespace, item.name
                ), f"{item.namespace}/{item.name}"
        finally:
            cache.close()
    finally:
        api.stop()


def test_synthetic_cluster_reads_per_node_or_whole_and_answers_the_same(
    tmp_path: Path,
) -> None:
    objs, pending = cluster(nodes=120, pods=2400)
    every = Listed(objs)
    api, kubeconfig = served(objs, tmp_path)
    ways = set()
    try:
        for ns, name in pending[:12]:  # two of each kind of stuck pod
            live = connect(kubeconfig=kubeconfig, read_ahead="triage")
            assert report(live, ns, name) == report(every, ns, name), f"{ns}/{name}"
            usage = live.node_usage()
            assert isinstance(usage, NodeUsageReads)
            ways.add("whole" if usage.whole else "per node" if usage.nodes_read else "none")
    finally:
        api.stop()
    assert ways == {"whole", "per node", "none"}


def test_lists_are_read_once_and_answer_namespaces_and_single_objects(tmp_path: Path) -> None:
    objs = pool_cluster()
    api, kubeconfig = served(objs, tmp_path)
    try:
        live = connect(kubeconfig=kubeconfig, read_ahead="sweep")
        pods = live.objects("Pod")
        assert live.objects("Pod") is pods
        before = len(api.requests)
        assert [p["metadata"]["name"] for p in live.objects("Pod", namespace="gpu-operator")] == [
            p["metadata"]["name"] for p in pods if p["metadata"]["namespace"] == "gpu-operator"
        ]
        got = live.get("Pod", "pinned", namespace="team-a")
        assert got is not None and got["spec"]["nodeSelector"] == {"pool": "small"}
        assert live.get("Pod", "pinned", namespace="team-b") is None
        assert live.get("Node", "n07") is not None
        assert len(api.requests) == before  # all from the lists already read
    finally:
        api.stop()


def test_a_cluster_wide_list_refused_is_said_when_asked(tmp_path: Path) -> None:
    objs = [*pool_cluster(), {"kind": "ResourceQuota", "apiVersion": "v1",
            "metadata": {"name": "q", "namespace": "team-a"}, "spec": {"hard": {}}}]  # fmt: skip
    api, kubeconfig = served(objs, tmp_path)
    api.forbidden.add(("resourcequotas", None))  # namespaced reads only
    try:
        live = connect(kubeconfig=kubeconfig, read_ahead="sweep")  # reads them all at once
        assert [q["metadata"]["name"] for q in live.objects("ResourceQuota", namespace="team-a")]
        with pytest.raises(ForbiddenError):
            live.objects("ResourceQuota")
    finally:
        api.stop()


def test_a_node_s_pods_that_cannot_be_read_leave_scheduling_unknown(tmp_path: Path) -> None:
    objs = pool_cluster()
    api, kubeconfig = served(objs, tmp_path)
    api.fail_calls[("GET", "/api/v1/pods")] = 403  # every cluster-wide pod list
    try:
        got = report(connect(kubeconfig=kubeconfig), "team-a", "pinned")
    finally:
        api.stop()
    assert "scheduling" in got["unknown_layers"]
    assert [u["resource"] for u in got["unread"]] == ["pods"]


def test_fake_server_lists_a_node_s_pods_as_they_move(tmp_path: Path) -> None:
    api, kubeconfig = served([pod("a", node_name="n1", phase="Running", selector={})], tmp_path)
    try:
        live = LiveSource(connect(kubeconfig=kubeconfig).client)

        def on(node_name: str) -> list[str]:
            return [p["metadata"]["name"] for p in live._pods_of(node_name)]

        assert on("n1") == ["a"]
        api.apply(pod("b", node_name="n1", phase="Running", selector={}))
        moved = api.object("Pod", "a", namespace="team-a")
        assert moved is not None
        moved["spec"]["nodeName"] = "n2"
        api.apply(moved)
        assert (on("n1"), on("n2")) == (["b"], ["a"])
        api.delete("Pod", "b", namespace="team-a")
        api.apply(pod("c", node_name="n2", phase="Succeeded", selector={}))
        assert (on("n1"), on("n2")) == ([], ["a"])
    finally:
        api.stop()


def test_workers_map_in_order_and_raise_after_every_read_ended() -> None:
    workers = Workers(3)
    assert workers.map(lambda x: x * 2, list(range(20))) == [x * 2 for x in range(20)]
    ended: list[int] = []

    def read(x: int) -> int:
        if x == 2:
            raise ValueError("two")
        ended.append(x)
        return x

    with pytest.raises(ValueError, match="two"):
        workers.map(read, list(range(10)))
    assert sorted(ended) == [0, 1, 3, 4, 5, 6, 7, 8, 9]
    workers.close()


def test_a_sweep_s_pods_hold_the_strings_of_the_jobs_read_before_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`pending -A` reads every pod and every Job at once, the Jobs filed as their pages come
    in: a pod whose Job was read before it holds the Job's own name and uid strings, as the
    cache's pods do (137 bytes a pod of a batch cluster at the command's peak). The Jobs filed
    are what a read of the whole list files; with the Jobs' list refused, the pods are read all
    the same and the sweep says what it could not read."""
    objs, _ = cluster(nodes=20, pods=300)
    every = Listed(objs)
    api, kubeconfig = served(objs, tmp_path)
    try:
        live = connect(kubeconfig=kubeconfig)
        filed: dict[str, dict[str, Obj]] = {}
        jobs = live._list("Job", None, filed=filed)
        assert filed == by_namespace(jobs) and len(jobs) == len(every.objects("Job"))
        pods = live._list("Pod", None, owner=_owner_in(filed))
        shared = 0
        for p in pods:
            refs = p["metadata"].get("ownerReferences") or []
            if not refs or refs[0]["kind"] != "Job":
                continue
            job = filed[p["metadata"]["namespace"]][refs[0]["name"]]
            labels = p["metadata"]["labels"]
            assert refs[0]["name"] is job["metadata"]["name"]
            assert labels["batch.kubernetes.io/job-name"] is job["metadata"]["name"]
            assert labels["batch.kubernetes.io/controller-uid"] is job["metadata"]["uid"]
            assert labels["controller-uid"] is job["metadata"]["uid"]
            shared += 1
        assert shared >= 250

        # A sweep's reads: the Jobs filed as read, the pods looking their Jobs up there.
        asked: dict[tuple[str, str | None], dict[str, Any]] = {}
        listing = LiveSource._list

        def spied(self: LiveSource, kind: str, ns: str | None, *args: Any, **kw: Any) -> Any:
            asked[(kind, ns)] = kw
            return listing(self, kind, ns, *args, **kw)

        monkeypatch.setattr(LiveSource, "_list", spied)
        swept = connect(kubeconfig=kubeconfig, read_ahead="sweep")
        assert sweep(swept, now=NOW).model_dump() == sweep(every, now=NOW).model_dump()
        job = jobs[0]["metadata"]
        found = swept.get("Job", job["name"], namespace=job["namespace"])
        assert found is asked[("Job", None)]["filed"][job["namespace"]][job["name"]]
        assert found == jobs[0]
        assert asked[("Pod", None)]["owner"]("Job", job["namespace"], job["name"]) is found

        api.fail_calls[("GET", "/apis/batch/v1/jobs")] = 403
        refused = connect(kubeconfig=kubeconfig, read_ahead="sweep")
        assert refused.count("Pod") == len(every.objects("Pod"))  # finished ones by name
        result = sweep(refused, now=NOW)
        assert any(line.startswith("cannot list jobs") for line in result.unread)
    finally:
        api.stop()


def spread_cluster() -> list[Obj]:
    """A batch namespace: 10 nodes, each with 8 finished pods of app=train, nine with a
    running one and the last full with another, and pending pods of app=train: one spread over
    the hosts (the full node is the one it could skew least on), one that shuns them on any
    node of any namespace (required anti-affinity with an empty namespace selector)."""
    objs: list[Obj] = [daemonset(p["metadata"]["labels"]["app"]) for p in operator_pods("x")]
    train = {"app": "train"}
    for i in range(10):
        host = f"n{i:02d}"
        objs.append(node(host))
        objs += operator_pods(host)
        objs += [
            pod(f"done-{i:02d}-{j}", node_name=host, phase="Succeeded", labels=train)
            for j in range(8)
        ]
        running = (f"run-{i:02d}", train, 4) if i < 9 else ("other", {"app": "other"}, 8)
        objs.append(pod(running[0], node_name=host, gpus=running[2], phase="Running",
                        labels=running[1]))  # fmt: skip
    spread = {"topologySpreadConstraints": [{
        "maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
        "whenUnsatisfiable": "DoNotSchedule", "labelSelector": {"matchLabels": train}}]}  # fmt: skip
    shun = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "topologyKey": "kubernetes.io/hostname", "namespaceSelector": {},
        "labelSelector": {"matchLabels": train}}]}}}  # fmt: skip
    objs.append(pod("spread", gpus=1, labels=train, extra_spec=spread))
    objs.append(pod("shun", gpus=1, labels=train, extra_spec=shun))
    return objs


@pytest.mark.parametrize("name", ["spread", "shun"])
def test_scheduling_filters_read_a_namespace_s_active_pods_only(name: str, tmp_path: Path) -> None:
    """Pod topology spread and pod affinity count the active pods (as a scheduler, whose
    informer lists no finished pod): read by a field selector that leaves a batch namespace's
    finished pods on the server, and answering as every pod read would."""
    objs = spread_cluster()
    api, kubeconfig = served(objs, tmp_path)
    try:
        live = connect(kubeconfig=kubeconfig, read_ahead="triage")
        got = report(live, "team-a", name)
    finally:
        api.stop()
    assert got == report(Listed(objs), "team-a", name)
    assert got["failing_layer"] == "scheduling"  # the filters judged: every node refuses
    assert ("spread" if name == "spread" else "anti-affinity") in got["headline"]
    lists = [(p, q.get("fieldSelector", "")) for p, q in api.requests if p.endswith("/pods")]
    if name == "spread":
        assert ("/api/v1/namespaces/team-a/pods", ACTIVE) in lists
    else:  # every namespace's: the term's selector is empty
        assert ("/api/v1/pods", ACTIVE) in lists
    # No list of the namespace's or of every pod, finished ones and all (the stack view reads
    # the operator's namespace whole).
    assert [p for p, q in lists if not q] == [f"/api/v1/namespaces/{OPNS}/pods"]


def test_active_pods_come_from_the_pods_already_read(tmp_path: Path) -> None:
    """A command that read every pod (a sweep) answers a namespace's active pods from them."""
    objs = spread_cluster()
    api, kubeconfig = served(objs, tmp_path)
    try:
        live = connect(kubeconfig=kubeconfig, read_ahead="sweep")
        live.objects("Pod")
        before = len(api.requests)
        found = live.indexed("Pod", "pod-active", "team-a")
        assert len(api.requests) == before
    finally:
        api.stop()
    assert found is not None
    assert sorted(p["metadata"]["name"] for p in found) == sorted(
        [f"run-{i:02d}" for i in range(9)] + ["other", "spread", "shun"]
    )
