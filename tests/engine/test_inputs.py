"""Bad input gets a clear one-line error naming the problem: snapshots, playbooks, names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.builders import cluster, node, pod
from triage import (
    InvalidNameError,
    MalformedSnapshotError,
    NotFoundError,
    PlaybookError,
    load_playbook,
    load_snapshot,
    triage,
    validate_name,
    validate_namespace,
)
from triage.model import Layer

POD_YAML = """
apiVersion: v1
kind: Pod
metadata: {name: p1, namespace: team-a}
spec: {containers: [{name: c, resources: {limits: {nvidia.com/gpu: 1}}}]}
status: {phase: Pending}
"""


def test_snapshot_shapes(tmp_path: Path) -> None:
    (tmp_path / "multi.yaml").write_text(
        POD_YAML + "---\napiVersion: v1\nkind: Node\nmetadata: {name: n1}\n"
    )
    pods_list = {
        "apiVersion": "v1",
        "kind": "PodList",
        "items": [{"metadata": {"name": "p2", "namespace": "team-a"}}],
    }
    (tmp_path / "list.json").write_text(json.dumps(pods_list))
    (tmp_path / "unknown.yaml").write_text(
        "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n"
    )
    (tmp_path / "notes.txt").write_text("not read")
    src = load_snapshot(tmp_path)
    assert {p["metadata"]["name"] for p in src.objects("Pod")} == {
        "p1",
        "p2",
    }  # kind inferred from PodList
    assert src.get("Node", "n1") is not None
    assert src.get("Namespace", "team-a") is not None  # implied by objects living there


@pytest.mark.parametrize(
    ("name", "content", "message"),
    [
        ("bad.yaml", "kind: Pod\nmetadata: {name: [unclosed\n", "bad.yaml: invalid YAML at line"),
        ("bad.json", '{"kind": "List", "items": [', "bad.json: invalid JSON at line 1"),
        ("scalar.yaml", "just a string\n", "scalar.yaml: expected Kubernetes objects"),
        ("items.yaml", "kind: List\nitems: [1, 2]\n", "items.yaml: a List item is not an object"),
    ],
)
def test_malformed_snapshots_name_the_file(
    tmp_path: Path, name: str, content: str, message: str
) -> None:
    (tmp_path / name).write_text(content)
    with pytest.raises(MalformedSnapshotError, match=message.replace("(", r"\(")) as e:
        load_snapshot(tmp_path / name)
    assert "\n" not in str(e.value)


def test_missing_snapshot_path(tmp_path: Path) -> None:
    with pytest.raises(MalformedSnapshotError, match="no such file"):
        load_snapshot(tmp_path / "nope.yaml")


@pytest.mark.parametrize(
    "bad", ["Train", "train_1", "-train", "a" * 254, "", "pod name", "<!channel>"]
)
def test_invalid_pod_names(bad: str) -> None:
    with pytest.raises(InvalidNameError):
        validate_name(bad)


def test_valid_names() -> None:
    assert validate_name("resnet-train-0.v2") == "resnet-train-0.v2"
    assert validate_namespace("team-a") == "team-a"
    with pytest.raises(InvalidNameError, match="DNS-1123 label"):
        validate_namespace("team.a")


def test_unknown_pod_and_namespace_are_distinct_one_line_errors() -> None:
    src = cluster(node("a1"), pod("train"))
    with pytest.raises(NotFoundError, match="no pod or workload named nope in namespace team-a"):
        triage(src, namespace="team-a", name="nope")
    with pytest.raises(NotFoundError, match="namespace ghost not found"):
        triage(src, namespace="ghost", name="train")
    with pytest.raises(InvalidNameError):
        triage(src, namespace="team-a", name="Bad_Name")


def test_bundled_playbook_routes_every_layer() -> None:
    pb = load_playbook()
    assert {layer: pb.route(layer).team for layer in Layer} == {
        Layer.DRIVER: "gpu-infrastructure",
        Layer.DEVICE_PLUGIN: "k8s-platform",
        Layer.SCHEDULING: "workload-owner",
        Layer.QUOTA: "capacity-management",
    }


def test_playbook_overrides_by_node_pool_and_namespace(tmp_path: Path) -> None:
    text = (Path(__file__).parents[2] / "playbooks" / "default.yaml").read_text()
    text = text.replace(
        "  routes: {}\n",
        "  routes:\n    a100: {driver: {team: a100-vendor-support, channel: '#a100'}}\n",
    ).replace("teams: {}", "teams: {nlp: {team: nlp-platform, channel: '#nlp', usergroup: S0NLP}}")
    path = tmp_path / "pb.yaml"
    path.write_text(text)
    pb = load_playbook(path)
    pool = pb.route(Layer.DRIVER, node_labels=[{"gpu-triage.io/node-pool": "a100"}])
    assert (pool.team, pool.source) == (
        "a100-vendor-support",
        "node pool gpu-triage.io/node-pool=a100",
    )
    ns = {"metadata": {"name": "team-a", "labels": {"gpu-triage.io/team": "nlp"}}}
    assert pb.route(Layer.QUOTA, namespace=ns).usergroup == "S0NLP"
    assert pb.route(Layer.DRIVER, namespace=ns).team == "gpu-infrastructure"  # platform layers stay


@pytest.mark.parametrize(
    ("mutation", "message"),
    [
        (
            lambda t: t.replace("  quota:         {team: capacity-management", "  #"),
            "routes: missing layers quota",
        ),
        (lambda t: t + "\nsurprise: 1\n", "surprise: Extra inputs are not permitted"),
        (lambda t: t.replace("team: k8s-platform", "team: ''"), "routes.device-plugin.team"),
        (lambda t: "- a list\n", "expected a mapping"),
        (lambda t: "routes: [\n", "invalid YAML"),
    ],
)
def test_bad_playbooks_fail_at_load_naming_the_field(
    tmp_path: Path, mutation, message: str
) -> None:  # type: ignore[no-untyped-def]
    text = (Path(__file__).parents[2] / "playbooks" / "default.yaml").read_text()
    path = tmp_path / "pb.yaml"
    path.write_text(mutation(text))
    with pytest.raises(PlaybookError, match=message) as e:
        load_playbook(path)
    assert str(path) in str(e.value)
