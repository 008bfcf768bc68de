"""Which workloads a sweep triages: pods not running, and workloads that created no pods
(quota rejected them, or a queue holds them), however they ask for GPUs or for none."""

from __future__ import annotations

from typing import Any

from tests.builders import cluster, namespace, pod
from triage.cluster.memory import MemorySource
from triage.fleet import stuck_workloads


def job(name: str, template: dict[str, Any], *, complete: bool = False) -> dict[str, Any]:
    conditions = [{"type": "Complete", "status": "True"}] if complete else []
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": {"template": {"spec": template}},
        "status": {"conditions": conditions},
    }


def test_podless_jobs_are_listed_whatever_they_ask_and_finished_ones_are_not() -> None:
    limits = pod("x", gpus=2)["spec"]
    claims = pod("x", gpus=0)["spec"] | {
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    }
    cpu_only = pod("x", gpus=0)["spec"]
    source = cluster(
        job("extended", limits),
        job("dra", claims),
        job("done", limits, complete=True),
        job("cpu", cpu_only),
    )
    found = [(s.namespace, s.name) for s in stuck_workloads(source)]
    assert found == [("team-a", "cpu"), ("team-a", "dra"), ("team-a", "extended")]
    gpus = {s.name: s.gpus for s in stuck_workloads(source)}
    assert gpus == {"cpu": 0, "dra": 1, "extended": 2}


class _Unindexed:
    """A source that keeps no index (a live read of one namespace): the caller scans."""

    def __init__(self, source: MemorySource) -> None:
        self._source = source

    def indexed(self, kind: str, index: str, key: object) -> None:
        return None

    def filed(self, kind: str, index: str, keys: object) -> None:
        return None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._source, name)


def test_owners_are_known_by_name_from_the_store_as_from_the_lists() -> None:
    """A stuck pod is listed under its nearest owner that exists: the Job, the Deployment over
    its ReplicaSet, the ReplicaSet when its Deployment is gone, itself when its owner is gone
    or of an unread kind. The same with the source's by-name index as by walking every list."""

    def rs(name: str, deployment: str) -> dict[str, Any]:
        refs = [{"kind": "Deployment", "name": deployment, "controller": True}]
        return {"apiVersion": "apps/v1", "kind": "ReplicaSet",
                "metadata": {"name": name, "namespace": "team-a", "ownerReferences": refs},
                "spec": {"replicas": 1, "template": {"spec": pod("x")["spec"]}}}  # fmt: skip

    deploy = {"apiVersion": "apps/v1", "kind": "Deployment",
              "metadata": {"name": "web", "namespace": "team-a"},
              "spec": {"replicas": 1, "template": {"spec": pod("x")["spec"]}}}  # fmt: skip
    objs = [
        job("train", pod("x")["spec"]), deploy, rs("web-1", "web"), rs("api-1", "api"),
        pod("train-0", owner=("Job", "train")), pod("web-1-a", owner=("ReplicaSet", "web-1")),
        pod("api-1-a", owner=("ReplicaSet", "api-1")), pod("gone-0", owner=("Job", "gone")),
        pod("other", ns="team-b", owner=("Job", "train")),  # the Job is in another namespace
    ]  # fmt: skip
    want = [("team-a", "api-1", "ReplicaSet"), ("team-a", "gone-0", "Pod"),
            ("team-a", "train", "Job"), ("team-a", "web", "Deployment"),
            ("team-b", "other", "Pod")]  # fmt: skip
    for source in (cluster(*objs), _Unindexed(cluster(*objs))):
        for scope in (None, ["team-a", "team-b"]):
            found = stuck_workloads(source, scope)
            assert [(s.namespace, s.name, s.kind) for s in found] == want
    unread: list[str] = []
    spaces = [namespace("team-a"), namespace("team-b")]
    jobs_unread = MemorySource([*objs, *spaces], not_served={"Job": "forbidden"})
    found = stuck_workloads(jobs_unread, unread=unread)
    assert ("team-a", "train-0", "Pod") in [(s.namespace, s.name, s.kind) for s in found]
    assert unread


def test_jobs_wanting_pods_are_found_alike_from_the_index_the_watch_keeps_and_the_list() -> None:
    """Through 300 random changes of Jobs and their pods (made, suspended or not, of
    parallelism 0 to 2, finished, failed, deleted), a sweep finds the same workloads from the index of Jobs that
    want pods (kept current as a watch keeps it) as from every Job read."""
    import random

    rnd = random.Random(7)
    source = cluster(namespace("team-a"), namespace("team-b"))
    plain = _Unindexed(source)
    assert stuck_workloads(source) == stuck_workloads(plain) == []
    for _ in range(300):
        ns, name = rnd.choice(("team-a", "team-b")), f"j{rnd.randrange(15)}"
        what = rnd.choice(("job", "job", "job", "done", "failed", "gone", "pod"))
        if what == "gone":
            source.remove("Job", name, namespace=ns)
        elif what == "pod":
            source.put(pod(f"{name}-0", ns=ns, owner=("Job", name)))
        else:
            w = job(name, pod("x")["spec"], complete=what == "done")
            w["metadata"]["namespace"] = ns
            if what == "failed":
                w["status"]["conditions"] = [{"type": "Failed", "status": "True"}]
            w["spec"] |= {"suspend": rnd.random() < 0.3, "parallelism": rnd.choice((0, 1, 2))}
            source.put(w)
        assert stuck_workloads(source) == stuck_workloads(plain)
    assert stuck_workloads(source)  # some were found along the way and at the end
