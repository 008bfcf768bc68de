"""`--snapshot` keeps each object as the watch cache does (`kube.slim`): a fifth of the memory
of the objects whole, and the same answers. Every pod and workload of every fixture is
triaged from the snapshot read slim and read whole: the reports, their text and the sweep are
equal, and so is the snapshot's age (the newest node heartbeat, which the slim nodes lack)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bench.goldens import KINDS, snapshots
from gpu_triage.sources import open_source
from triage import triage
from triage.cluster.objects import Obj, name_of, ns_of
from triage.cluster.snapshot import load_snapshot
from triage.cluster.source import MalformedSnapshotError
from triage.fleet import sweep
from triage.render import report_data, to_text

NOW = datetime(2026, 12, 3, tzinfo=UTC)


@pytest.mark.parametrize("path", snapshots(), ids=lambda p: p.name)
def test_a_snapshot_read_slim_answers_as_read_whole(path: Path) -> None:
    whole, slim = load_snapshot(path), open_source(snapshot=str(path))
    assert slim.as_of == whole.as_of
    for kind in KINDS:
        for obj in whole.objects(kind):
            ns, name = ns_of(obj) or "default", name_of(obj)
            want = triage(whole, namespace=ns, name=name, now=NOW)
            got = triage(slim, namespace=ns, name=name, now=NOW)
            assert report_data(got) == report_data(want), f"{kind} {ns}/{name}"
            assert to_text(got) == to_text(want)
    assert sweep(slim, now=NOW).model_dump() == sweep(whole, now=NOW).model_dump()


def test_what_a_slim_read_keeps_of_a_pod(tmp_path: Path) -> None:
    """What the engine does not read of a pod (its IPs, its containers' commands) is not
    held; its requests are."""
    path = Path(__file__).parents[1] / "fixtures" / "resourcequota-exceeded.yaml"
    whole = next(p for p in load_snapshot(path).objects("Pod") if "podIPs" in p["status"])
    pod = next(p for p in open_source(snapshot=str(path)).objects("Pod")
               if (ns_of(p), name_of(p)) == (ns_of(whole), name_of(whole)))  # fmt: skip
    assert "podIPs" not in pod["status"] and "startTime" not in pod["status"]
    ctr = pod["spec"]["containers"][0]
    assert set(ctr) <= {"name", "image", "resources", "restartPolicy", "ports"}
    assert ctr["resources"] == whole["spec"]["containers"][0]["resources"]


def test_two_copies_that_differ_in_what_is_read_are_still_refused(tmp_path: Path) -> None:
    one = tmp_path / "one.yaml"
    one.write_text(
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1, labels: {a: '1'}}\n---\n"
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1, labels: {a: '2'}}\n"
    )
    with pytest.raises(MalformedSnapshotError, match="appears twice with different contents"):
        open_source(snapshot=str(one))


def test_an_object_the_projection_cannot_slim_is_kept_whole() -> None:
    """A shape the projection does not expect (a snapshot edited by hand) leaves the object
    whole: judged as it would be without the projection, never a traceback."""
    path = Path(__file__).parents[1] / "fixtures" / "resourcequota-exceeded.yaml"

    def fragile(kind: str) -> Callable[[Obj], Obj]:
        def slim(obj: Obj) -> Obj:
            if kind == "Pod":
                raise TypeError("an odd shape")
            return obj

        return slim

    whole = load_snapshot(path)
    kept = load_snapshot(path, project=fragile)
    assert kept.objects("Pod") == whole.objects("Pod")
    assert sweep(kept, now=NOW).model_dump() == sweep(whole, now=NOW).model_dump()


@pytest.mark.parametrize("path", snapshots(), ids=lambda p: p.name)
def test_node_verification_and_preflight_read_slim_answer_as_read_whole(path: Path) -> None:
    """`verify-node(s)` and `preflight` on a snapshot read as the CLI reads it."""
    from triage.verify.node import verify_nodes
    from triage.verify.preflight import preflight

    whole, slim = load_snapshot(path), open_source(snapshot=str(path))
    assert [r.model_dump() for r in verify_nodes(slim)] == [
        r.model_dump() for r in verify_nodes(whole)
    ]
    assert preflight(slim).model_dump() == preflight(whole).model_dump()
