"""Workloads as the cache and a sweep's lists keep them (`kube.slim.slim_workload`) answer as
full ones: over every fixture, every pod and workload triaged and every fixture swept give the
same reports when each Job, ReplicaSet, StatefulSet and Deployment is decoded typed and
projected as `kube` does; and a batch cluster's Jobs cost a fraction of what they do whole."""

from __future__ import annotations

import copy
import sys
import zlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest

from kube.decode import list_decoder
from kube.share import Sharer
from kube.slim import projection
from tests.builders import namespace, node, pod
from triage import MalformedSnapshotError, load_playbook, triage
from triage.cluster.memory import MemorySource
from triage.cluster.objects import Obj, template_labels
from triage.cluster.snapshot import read_snapshot
from triage.engine import verdict
from triage.fleet import sweep

ROOT = Path(__file__).parents[2]
NOW = datetime(2025, 1, 1, 1, 0, tzinfo=UTC)
WORKLOADS = ("Job", "ReplicaSet", "StatefulSet", "Deployment")
FIXTURES = [
    *sorted(p for p in (ROOT / "tests/fixtures").glob("*.yaml") if p.name != "expected.yaml"),
    ROOT / "gpu_triage/demo/cluster.yaml",
]


def _slimmed(objs: list[Obj]) -> list[Obj]:
    """`objs` with each workload of a template decoded typed from a list page and projected,
    sharing one `Sharer` per kind, as an informer does."""
    out = [o for o in objs if o.get("kind") not in WORKLOADS]
    for kind in WORKLOADS:
        items = [o for o in objs if o.get("kind") == kind]
        page = orjson.dumps({"metadata": {}, "items": items}, default=str)
        decode = list_decoder(kind, projected=True)
        assert decode is not None
        project = projection(kind, Sharer())
        out += [project(o) for o in decode(page)["items"]]
    return out


def job(name: str, *, status: Obj, template: Obj | None = None, **spec: Any) -> Obj:
    """A Job as `kubectl get job -o yaml` prints it: the API server's defaults, the selector
    and template labels its controller sets, each container's variables, mounts and probe,
    the times of its status, and managedFields."""
    uid = f"0c6b8a52-5d1e-4f7a-9b3c-{zlib.crc32(name.encode()):012x}"
    labels = {"batch.kubernetes.io/controller-uid": uid, "batch.kubernetes.io/job-name": name,
              "controller-uid": uid, "job-name": name}  # fmt: skip
    tpl = pod("x", gpus=8)["spec"] | {"restartPolicy": "Never", "dnsPolicy": "ClusterFirst",
                                       "terminationGracePeriodSeconds": 30}  # fmt: skip
    tpl["containers"][0] |= {
        "env": [{"name": "RUN_ID", "value": name}], "imagePullPolicy": "IfNotPresent",
        "volumeMounts": [{"name": "data", "mountPath": "/data"}],
        "readinessProbe": {"exec": {"command": ["true"]}},
    }  # fmt: skip
    tpl["volumes"] = [{"name": "data", "emptyDir": {}}]
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "team-a", "uid": uid, "generation": 1,
                     "resourceVersion": "4411", "creationTimestamp": "2026-12-02T12:00:00Z",
                     "labels": {"team": "a"},
                     "managedFields": [{"manager": "kubectl-create", "operation": "Update"}]},
        "spec": {"backoffLimit": 6, "completionMode": "NonIndexed", "completions": 1,
                 "manualSelector": False, "parallelism": 1, "suspend": False,
                 "podReplacementPolicy": "TerminatingOrFailed",
                 "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}},
                 "template": {"metadata": {"creationTimestamp": None, "labels": labels,
                                           "annotations": {"sidecar.istio.io/inject": "false"}},
                              "spec": tpl | (template or {})}} | spec,
        "status": {"startTime": "2026-12-02T12:00:01Z", "terminating": 0,
                   "uncountedTerminatedPods": {}} | status,
    }  # fmt: skip


def _finished(kind: str) -> Obj:
    return {"conditions": [
        {"type": t, "status": "True", "reason": "r", "message": "m",
         "lastProbeTime": "2026-12-02T12:10:00Z", "lastTransitionTime": "2026-12-02T12:10:00Z"}
        for t in (f"{kind}Target", kind)], "completionTime": "2026-12-02T12:10:00Z"}  # fmt: skip


def batch_cluster() -> list[Obj]:
    """Jobs of a batch cluster in the states a sweep and a triage tell apart: running, pending
    on a product no node has, waiting for pods it has not made, finished, failed, suspended
    with no queue; and a Deployment scaled to zero."""
    running, waiting = (
        job("running", status={"active": 1, "ready": 1}),
        job("waiting", status={"active": 1, "ready": 0}, parallelism=3, completions=3),
    )
    objs = [
        namespace("team-a"), node("n0", gpus=8), running, waiting,
        job("no-such-gpu", status={}, template={"nodeSelector": {"nvidia.com/gpu.product": "B200"}}),
        job("done", status=_finished("Complete") | {"succeeded": 1, "ready": 0}),
        job("failed", status=_finished("Failed") | {"failed": 7, "ready": 0}),
        job("held", status={}, suspend=True),
        {"apiVersion": "apps/v1", "kind": "Deployment",
         "metadata": {"name": "idle", "namespace": "team-a", "uid": "d-1"},
         "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "idle"}},
                  "strategy": {"type": "RollingUpdate"},
                  "template": {"metadata": {"labels": {"app": "idle"}}, "spec": pod("y")["spec"]}},
         "status": {"observedGeneration": 2}},
    ]  # fmt: skip
    for owner, phase, node_name in ((running, "Running", "n0"), (waiting, "Pending", None)):
        name = owner["metadata"]["name"]
        p = pod(f"{name}-0", gpus=8, phase=phase, node_name=node_name, owner=("Job", name),
                labels=owner["spec"]["template"]["metadata"]["labels"])  # fmt: skip
        objs.append(p)
    return objs


def _sources(path: Path | None) -> tuple[MemorySource, MemorySource]:
    if path is None:
        objs, kw = batch_cluster(), {"cluster_name": "c"}
    else:
        try:
            loaded = read_snapshot(path)
        except MalformedSnapshotError:
            pytest.skip("not a cluster dump")
        objs = loaded.objects
        kw = {"cluster_name": "c", "not_served": loaded.not_served,
              "scope": loaded.scope, "notes": loaded.notes}  # fmt: skip
    return MemorySource(copy.deepcopy(objs), **kw), MemorySource(_slimmed(objs), **kw)


@pytest.mark.parametrize("path", [None, *FIXTURES], ids=lambda p: p.stem if p else "batch")
def test_slim_workloads_triage_and_sweep_as_full_ones(path: Path | None) -> None:
    full, slim = _sources(path)
    playbook = load_playbook()
    for kind in ("Pod", *WORKLOADS):
        for obj in full.objects(kind):
            ns, name = obj["metadata"].get("namespace", "default"), obj["metadata"]["name"]
            want = triage(full, namespace=ns, name=name, playbook=playbook, now=NOW)
            got = triage(slim, namespace=ns, name=name, playbook=playbook, now=NOW)
            assert got.model_dump(mode="json") == want.model_dump(mode="json"), (kind, name)
            assert verdict(slim, namespace=ns, name=name) == verdict(full, namespace=ns, name=name)
    swept = [sweep(s, playbook=playbook, now=NOW).model_dump(mode="json") for s in (slim, full)]
    assert swept[0] == swept[1]


def test_the_fixtures_hold_workloads_of_every_templated_kind() -> None:
    counts = dict.fromkeys(WORKLOADS, 0)
    for path in FIXTURES:
        try:
            objs = read_snapshot(path).objects
        except MalformedSnapshotError:
            continue
        for o in objs:
            if o.get("kind") in counts:
                counts[o["kind"]] += 1
    assert min(counts.values()) > 20, counts


def test_jobs_alike_but_for_their_run_share_their_template_spec_and_status() -> None:
    jobs = [job(f"train-{i}", status=_finished("Complete") | {"succeeded": 1}) for i in range(3)]
    for j in jobs[1:]:  # finished at another time
        for c in j["status"]["conditions"]:
            c["lastTransitionTime"] = c["lastProbeTime"] = "2026-12-03T00:00:00Z"
        j["status"]["completionTime"] = "2026-12-03T00:00:00Z"
    slim = [o for o in _slimmed(jobs) if o["kind"] == "Job"]
    # One spec for the three: the labels the Job controller set to each Job's own name and
    # uid are left out of its template, and put back from the Job when read.
    specs = {id(o["spec"]) for o in slim}
    statuses = {id(o["status"]) for o in slim}
    assert len(specs) == 1 and len(statuses) == 1
    for o, j in zip(slim, jobs, strict=True):
        want = j["spec"]["template"]["metadata"]["labels"]
        assert list(template_labels(o).items()) == list(want.items())
        assert template_labels(o)["job-name"] == o["metadata"]["name"] == j["metadata"]["name"]
    one = slim[0]
    assert "selector" not in one["spec"] and "managedFields" not in one["metadata"]
    # The template's pod spec as a pod's: what the layers read, not the run's variables.
    assert one["spec"]["template"]["spec"]["containers"][0].keys() == {"name", "image", "resources"}
    assert one["spec"]["template"]["metadata"]["labels"] == {}
    # Fifty Jobs of a batch queue: a twelfth of what they cost decoded whole (managedFields
    # off; an eighth while each kept a template of its own).
    many = [job(f"run-{i}", status={"active": 1, "ready": 1}) for i in range(50)]
    whole = orjson.loads(orjson.dumps(many))
    for j in whole:
        del j["metadata"]["managedFields"]
    assert _size(_slimmed(many)) * 12 < _size(whole)


@pytest.mark.parametrize(
    ("labels", "specs"),
    [
        # before 1.27 the Job controller set only the legacy two
        ({"app": "x", "controller-uid": "{uid}", "job-name": "{name}"}, 1),
        # a manual selector: the user's labels, one of them by chance the Job's name
        ({"job-name": "{name}", "role": "worker"}, 1),
        # a label naming another Job stays
        ({"batch.kubernetes.io/job-name": "other", "controller-uid": "{uid}"}, 1),
        # not in the API server's order: kept as it is, a set per Job
        ({"job-name": "{name}", "app": "x", "controller-uid": "{uid}"}, 3),
        ({}, 1),
    ],
)
def test_a_jobs_template_labels_read_back_as_they_were(labels: dict[str, str], specs: int) -> None:
    jobs = [job(f"train-{i}", status={"active": 1}) for i in range(3)]
    for j in jobs:
        meta = j["metadata"]
        j["spec"]["template"]["metadata"]["labels"] = {
            k: v.format(uid=meta["uid"], name=meta["name"]) for k, v in labels.items()
        }
    slim = [o for o in _slimmed(jobs) if o["kind"] == "Job"]
    for o, j in zip(slim, jobs, strict=True):
        want = j["spec"]["template"]["metadata"]["labels"]
        assert list(template_labels(o).items()) == list(want.items())
    # Jobs alike but for the labels naming each keep one spec.
    assert len({id(o["spec"]) for o in slim}) == specs


def test_a_template_without_metadata_or_with_odd_metadata_is_kept_as_it_was() -> None:
    bare, odd = job("train-0", status={}), job("train-1", status={})
    del bare["spec"]["template"]["metadata"]
    odd["spec"]["template"]["metadata"] = None
    slim = {o["metadata"]["name"]: o for o in _slimmed([bare, odd]) if o["kind"] == "Job"}
    assert "metadata" not in slim["train-0"]["spec"]["template"]
    assert slim["train-1"]["spec"]["template"]["metadata"] is None
    assert template_labels(slim["train-0"]) == template_labels(slim["train-1"]) == {}


def test_a_template_label_key_that_is_not_text_keeps_its_labels_whole() -> None:
    # A hand-written YAML snapshot may hold one (`1: x`); it is projected, not sorted.
    made = job("train-0", status={})
    labels = made["spec"]["template"]["metadata"]["labels"]
    labels[1] = "x"  # type: ignore[index]
    slim = projection("Job", Sharer())(copy.deepcopy(made))
    assert template_labels(slim) == labels


def _size(objs: Any, seen: set[int] | None = None) -> int:
    """Bytes held by `objs` and what they hold, each object counted once."""
    seen = set() if seen is None else seen
    if id(objs) in seen:
        return 0
    seen.add(id(objs))
    size = sys.getsizeof(objs)
    if isinstance(objs, dict):
        size += sum(_size(k, seen) + _size(v, seen) for k, v in objs.items())
    elif isinstance(objs, list | tuple):
        size += sum(_size(v, seen) for v in objs)
    return size
