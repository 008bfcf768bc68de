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

from kube.compact import ENABLED, compact, compacted
from kube.decode import list_decoder
from kube.share import Sharer
from kube.slim import projection
from tests.builders import pod

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
