"""What the cache keeps of a pod is as small as it can be, and still what the pod says.

Small dicts (`kube.compact`) are real dicts, equal to ordinary ones; a pod's spec and status
are shared by what their slim forms keep (`kube.slim`), never across a difference the engine
reads.
"""

from __future__ import annotations

import copy
import json
import sys
from typing import Any

import pytest

from kube.compact import ENABLED, LABEL_SHAPES, compact, compact_labels, compacted
from kube.decode import list_decoder
from kube.share import Sharer
from kube.slim import projection
from tests.builders import pod
from triage.cluster.objects import POD_ANNOTATIONS

Obj = dict[str, Any]


def test_compact_dicts_are_ordinary_dicts_only_smaller() -> None:
    keys = ("kind", "apiVersion", "metadata", "spec", "status")
    made = compact(keys, ("Pod", "v1", {"name": "a"}, {}, {}))
    plain = dict(zip(keys, ("Pod", "v1", {"name": "a"}, {}, {}), strict=True))
    assert type(made) is dict and made == plain and list(made) == list(plain)
    assert json.dumps(made) == json.dumps(plain) and copy.deepcopy(made) == plain
    if ENABLED:  # CPython 3.11-3.13
        assert sys.getsizeof(made) < sys.getsizeof(plain)
    made["extra"] = 1  # may still change: it becomes an ordinary dict
    assert made == plain | {"extra": 1}
    again = compact(keys, ("Pod", "v1", {}, {}, {}))
    assert "extra" not in again  # the others are not touched
    with pytest.raises(ValueError):
        compact(keys, ("Pod",))
    odd = compacted({"kubernetes.io/hostname": "n1", "class": 1, "_x": 2})
    assert odd == {"kubernetes.io/hostname": "n1", "class": 1, "_x": 2}


def slim(pods: list[Obj], sharer: Sharer | None = None) -> list[Obj]:
    """`pods` as the cache keeps them: decoded typed, then projected."""
    page = json.dumps({"items": pods}).encode()
    decode = list_decoder("Pod")
    assert decode is not None
    project = projection("Pod", sharer or Sharer())
    return [project(p) for p in decode(page)["items"]]


def running(name: str, *, started: str, ready_since: str, node: str = "n1") -> Obj:
    p = pod(name, node_name=node, phase="Running", selector={})
    p["status"]["conditions"] = [
        {"type": "Ready", "status": "True", "lastTransitionTime": ready_since},
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": ready_since},
    ]
    p["status"]["containerStatuses"] = [
        {"name": "main", "ready": True, "restartCount": 0, "containerID": f"id-{name}",
         "state": {"running": {"startedAt": started}}},
    ]  # fmt: skip
    p["spec"]["volumes"] = [{"name": f"kube-api-access-{name}", "projected": {}}]
    return p


def test_pods_share_what_differs_only_where_the_cache_keeps_nothing() -> None:
    a = running("a", started="2025-01-01T00:00:00Z", ready_since="2025-01-01T00:00:01Z")
    b = running("b", started="2025-01-02T00:00:00Z", ready_since="2025-01-02T00:00:01Z")
    x, y = slim([a, b])
    # start times, true conditions' transition times, container ids, the token volume
    assert x["spec"] is y["spec"] and x["status"] is y["status"]
    assert x["status"]["containerStatuses"][0]["state"] == {"running": {"kept": False}}
    assert "volumes" not in x["spec"]
    assert x["metadata"]["name"] == "a" and y["metadata"]["name"] == "b"


@pytest.mark.parametrize(
    "change",
    [
        lambda p: p["status"]["conditions"].__setitem__(
            0, {"type": "Ready", "status": "False", "lastTransitionTime": "2025-01-03T00:00:00Z"}
        ),
        lambda p: p["status"]["containerStatuses"][0].__setitem__("restartCount", 3),
        lambda p: p["status"]["containerStatuses"][0].__setitem__(
            "state", {"waiting": {"reason": "CrashLoopBackOff"}}
        ),
        lambda p: p["status"].__setitem__("phase", "Failed"),
        lambda p: p["spec"]["containers"][0]["resources"].__setitem__("limits", {"cpu": "1"}),
        lambda p: p["spec"]["volumes"].append(
            {"name": "data", "persistentVolumeClaim": {"claimName": "c"}}
        ),
        lambda p: p["spec"].__setitem__("nodeName", "n2"),
    ],
    ids=["false condition", "restarts", "state", "phase", "limits", "claim", "node"],
)
def test_pods_differing_where_the_engine_reads_share_nothing_there(change: Any) -> None:
    a = running("a", started="2025-01-01T00:00:00Z", ready_since="2025-01-01T00:00:01Z")
    b = running("b", started="2025-01-01T00:00:00Z", ready_since="2025-01-01T00:00:01Z")
    change(b)
    x, y = slim([a, b])
    assert (x["spec"], x["status"]) != (y["spec"], y["status"])
    alone = slim([b])[0]  # what it is on its own, sharing nothing
    assert (y["spec"], y["status"]) == (alone["spec"], alone["status"])


def test_a_status_of_unusual_shape_is_kept_as_it_is_unshared() -> None:
    a = running("a", started="2025-01-01T00:00:00Z", ready_since="2025-01-01T00:00:01Z")
    a["status"]["containerStatuses"][0]["state"] = {"terminated": {"exitCode": 1, "x": {"y": 1}}}
    b = copy.deepcopy(a)
    b["metadata"]["name"] = "b"
    x, y = slim([a, b])
    assert x["status"]["containerStatuses"][0]["state"] == {
        "terminated": {"exitCode": 1, "x": {"y": 1}}
    }
    assert x["status"] == y["status"]


UID = "6f1d2c3b-0a9e-4e5f-8c7d-112233445566"


def job_pod(name: str, job: str, *, uid: str = UID, annotations: Obj | None = None) -> Obj:
    """A Job's pod as the Job controller labels it (its name and uid, twice each)."""
    p = pod(name, selector={})
    p["metadata"]["labels"] = {
        "app": "train", "batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": job, "controller-uid": uid, "job-name": job,
    }  # fmt: skip
    p["metadata"]["ownerReferences"] = [
        {"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": uid, "controller": True}
    ]
    if annotations is not None:
        p["metadata"]["annotations"] = annotations
    return p


def test_the_labels_of_a_job_s_pods_are_kept_once_and_each_value_once() -> None:
    a, b = slim([job_pod("train-a-x1", "train-a"), job_pod("train-a-x2", "train-a")])
    assert a["metadata"]["labels"] is b["metadata"]["labels"]
    labels = a["metadata"]["labels"]
    assert list(labels.items()) == list(job_pod("x", "train-a")["metadata"]["labels"].items())
    # The Job's name and uid, written twice by its controller, are one string each, the name
    # the very one of the owner reference.
    assert labels["job-name"] is labels["batch.kubernetes.io/job-name"]
    assert labels["job-name"] is a["metadata"]["ownerReferences"][0]["name"]
    assert labels["controller-uid"] is labels["batch.kubernetes.io/controller-uid"]
    if ENABLED:
        assert sys.getsizeof(labels) < sys.getsizeof(dict(labels))
    assert json.loads(json.dumps(a))["metadata"]["labels"] == labels


def test_a_stateful_set_s_pod_is_labelled_with_its_own_name_kept_once() -> None:
    p = pod("db-0", selector={})
    p["metadata"]["labels"] = {"app": "db", "statefulset.kubernetes.io/pod-name": "db-0"}
    (kept,) = slim([p])
    assert (
        kept["metadata"]["labels"]["statefulset.kubernetes.io/pod-name"] is kept["metadata"]["name"]
    )


def test_a_label_set_seen_twice_stays_shared_and_one_seen_once_is_not_kept() -> None:
    sharer = Sharer()
    first = slim([job_pod("ds-a", "ds"), job_pod("ds-b", "ds")], sharer)
    # Hundreds of one-pod Jobs later (each label set seen once), a pod of the first set still
    # gets the set kept; a set seen once before them is made anew, equal.
    jobs = [job_pod(f"j{i}-x", f"j{i}", uid=f"uid-{i}") for i in range(300)]
    once = slim(jobs, sharer)
    again = slim([job_pod("ds-c", "ds"), job_pod("j0-y", "j0", uid="uid-0")], sharer)
    assert again[0]["metadata"]["labels"] is first[0]["metadata"]["labels"]
    assert again[1]["metadata"]["labels"] is not once[0]["metadata"]["labels"]
    assert again[1]["metadata"]["labels"] == once[0]["metadata"]["labels"]


def test_a_pod_updated_again_and_again_leaves_no_label_set_kept_for_good() -> None:
    """A watch sends a pod's every change (scheduled, started, ready): its labels are still
    one pod's, and are not kept once the sets of other pods have come."""
    sharer = Sharer()
    updates = slim([job_pod("solo-x", "solo", uid="uid-solo")] * 3, sharer)
    assert updates[0]["metadata"]["labels"] is updates[2]["metadata"]["labels"]
    slim([job_pod(f"j{i}-x", f"j{i}", uid=f"uid-{i}") for i in range(300)], sharer)
    (later,) = slim([job_pod("solo-y", "solo", uid="uid-solo")], sharer)
    assert later["metadata"]["labels"] is not updates[0]["metadata"]["labels"]
    assert later["metadata"]["labels"] == updates[0]["metadata"]["labels"]


def test_labels_of_unusual_shape_are_kept_as_they_are() -> None:
    odd = job_pod("odd", "j")
    odd["metadata"]["labels"]["nested"] = {"not": "a label value"}
    (kept,) = slim([odd])
    assert kept["metadata"]["labels"] == odd["metadata"]["labels"]
    plain = compact_labels(("_private", "app"), ("x", "y"))  # not made as an attribute
    assert plain == {"_private": "x", "app": "y"}


def test_a_pod_keeps_only_the_annotations_the_engine_reads() -> None:
    cni = {
        "cni.projectcalico.org/containerID": "ab" * 32,
        "cni.projectcalico.org/podIP": "10.244.3.17/32",
        "k8s.v1.cni.cncf.io/network-status": '[{"name": "k8s-pod-network"}]',
    }
    read = {"kueue.x-k8s.io/queue-name": "team-a", "scheduling.k8s.io/group-name": "pg"}
    gang, plain, bare = slim([
        job_pod("gang", "j", annotations=cni | read),
        job_pod("plain", "j", annotations=cni),
        job_pod("bare", "j"),
    ])  # fmt: skip
    assert gang["metadata"]["annotations"] == read
    assert set(read) <= POD_ANNOTATIONS
    # Only the CNI's: no annotations at all, and metadata as small as a pod's without any.
    assert "annotations" not in plain["metadata"]
    assert sys.getsizeof(plain["metadata"]) == sys.getsizeof(bare["metadata"])


def test_label_sets_have_a_budget_of_their_own(monkeypatch: pytest.MonkeyPatch) -> None:
    """More sets of label keys than their budget leave the metadata's dicts small, and the
    sets past the budget get ordinary dicts, equal."""
    monkeypatch.setattr(compact_labels.__self__, "_makers", {})  # this process's, restored
    made = [compact_labels((f"example.com/set-{i}",), ("v",)) for i in range(LABEL_SHAPES + 1)]
    assert made[-1] == {f"example.com/set-{LABEL_SHAPES}": "v"}
    metadata = compact(("kind", "apiVersion", "metadata", "spec", "status"), [None] * 5)
    if ENABLED:
        assert sys.getsizeof(made[0]) < sys.getsizeof(dict(made[0]))
        assert sys.getsizeof(made[-1]) == sys.getsizeof(dict(made[-1]))  # past the budget
        assert sys.getsizeof(metadata) < sys.getsizeof(dict(metadata))


def test_no_keys_make_an_empty_dict() -> None:
    """A slimmed part with nothing kept (a template of fields no layer reads): an empty
    dict, not a code generation error."""
    from kube.compact import compact, compacted

    assert compacted({}) == {} and compact((), ()) == {}
    assert type(compacted({})) is dict
