"""Nodes with equal health signatures are judged once per triage, as a class. A class must
never hide a difference that changes the answer: the labels a pod selects on, a node named by
`matchFields`, a broken component on one node of a healthy pool."""

from __future__ import annotations

from typing import Any

import pytest

from tests.builders import A100, H100, cluster, node, operator_pods, pod
from triage import Layer, TriageReport, triage


def run(*objs: Any) -> TriageReport:
    return triage(cluster(*objs), namespace="team-a", name="train")


def same_pool(name: str, product: str) -> dict[str, Any]:
    """A node whose resources equal every other such node's: only its labels differ."""
    return node(name, product=product, gpus=8)


@pytest.mark.parametrize("order", ["a-first", "h-first"])
def test_nodes_differing_only_in_a_selected_label_are_judged_apart(order: str) -> None:
    nodes = [same_pool("a1", A100), same_pool("h1", H100)]
    if order == "h-first":
        nodes.reverse()
    p = pod("train", gpus=1, selector={"nvidia.com/gpu.product": H100})
    r = run(*nodes, operator_pods("a1"), operator_pods("h1"), p)
    assert r.failing_layer is None
    assert r.finding(Layer.SCHEDULING).summary == (
        "1 of 1 node(s) matching the pod can take it now (h1)"
    )


def test_affinity_on_a_custom_label_splits_a_pool() -> None:
    infer = same_pool("a2", A100)
    infer["metadata"]["labels"]["pool"] = "inference"
    train = same_pool("a1", A100)
    train["metadata"]["labels"]["pool"] = "training"
    busy = pod("busy", gpus=8, node_name="a2", phase="Running", selector={})
    p = pod("train", gpus=1, selector={})
    term = {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["inference"]}]}
    p["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
        }
    }
    r = run(train, infer, operator_pods("a1"), operator_pods("a2"), busy, p)
    assert r.failing_layer == Layer.SCHEDULING
    f = r.finding(Layer.SCHEDULING)
    assert "scheduling.insufficient" in f.codes
    assert "1 of 1 node(s) the pod can use are short of free resources" in f.summary
    assert "a2" in " ".join(f.evidence) and "node a1" not in " ".join(f.evidence)


def test_match_fields_picks_one_node_of_identical_ones() -> None:
    p = pod("train", gpus=1, selector={})
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a2"]}]}
    p["spec"]["affinity"] = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}
        }
    }
    busy = pod("busy", gpus=8, node_name="a2", phase="Running", selector={})
    r = run(
        same_pool("a1", A100),
        same_pool("a2", A100),
        operator_pods("a1"),
        operator_pods("a2"),
        busy,
        p,
    )
    assert r.failing_layer == Layer.SCHEDULING
    assert "1 of 1 node(s)" in r.finding(Layer.SCHEDULING).summary


def test_a_broken_plugin_in_an_excluded_pool_is_a_side_finding_for_that_node_only() -> None:
    r = run(
        same_pool("a1", A100),
        operator_pods("a1"),
        same_pool("a2", A100),
        operator_pods("a2", plugin="crash"),
        same_pool("h1", H100),
        operator_pods("h1"),
        pod("train", gpus=1, selector={"nvidia.com/gpu.product": H100}),
    )
    assert r.failing_layer is None
    plugin = r.finding(Layer.DEVICE_PLUGIN)
    text = " ".join([plugin.summary, *plugin.evidence])
    assert "this pod cannot use that node anyway: selector mismatch" in text
    assert "a2" in text and "a1" not in text
