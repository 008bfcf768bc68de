"""The report's machine-readable `nodes` list: every node judged for the pod, none left out,
with the reason code, the blocking object and, for a node short of room, asked versus free."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.builders import cluster, node, operator_pods, pod
from triage import load_snapshot, triage
from triage.cluster.objects import name_of

FIXTURES = Path(__file__).parents[1] / "fixtures"
CASES = yaml.safe_load((FIXTURES / "expected.yaml").read_text())


@pytest.mark.parametrize("case", CASES, ids=lambda c: c["file"])
def test_every_node_is_listed_once_and_agrees_with_the_answer(case: dict) -> None:
    src = load_snapshot(FIXTURES / case["file"])
    report = triage(src, namespace=case["namespace"], name=case["name"], nodes=True)
    assert report.nodes is not None
    names = [n.name for n in report.nodes]
    assert len(names) == len(set(names)) and names == sorted(names)
    pod_obj = src.get("Pod", case["name"], namespace=case["namespace"])
    bound = pod_obj is not None and (pod_obj.get("spec") or {}).get("nodeName")
    if bound:
        assert names == [bound]
    elif report.unknown_layers == []:
        assert set(names) == {name_of(n) for n in src.objects("Node")}
    for entry in report.nodes:
        assert entry.usable == (entry.reason is None)
        assert not entry.usable or entry.eligible
        if entry.reason == "scheduling.insufficient":
            assert entry.resources and all(r.asked and r.free for r in entry.resources)
    # the nodes the cause blocks on are not usable there (pod-level causes, a claim that never
    # binds or a quota, leave nodes usable: they are in the findings, not the node list)
    by_name = {n.name: n for n in report.nodes}
    for blocked in report.cause.nodes if report.cause else []:
        assert blocked not in by_name or not by_name[blocked].usable, (case["file"], blocked)


def test_a_full_pool_says_asked_versus_free_per_node() -> None:
    src = load_snapshot(FIXTURES / "fleet-many-causes.yaml")
    job = src.objects("Pod", namespace="team-nlp")
    sft = next(p for p in job if name_of(p).startswith("llm-sft-a"))
    report = triage(src, namespace="team-nlp", name=name_of(sft), nodes=True)
    assert report.nodes is not None
    h100 = [n for n in report.nodes if n.name.startswith("gpu-h100")]
    assert [n.reason for n in h100] == ["scheduling.insufficient"] * 2
    assert [(r.resource, r.asked, r.free, r.allocatable) for n in h100 for r in n.resources] == [
        ("nvidia.com/gpu", "4", "0", "8")
    ] * 2
    a100 = next(n for n in report.nodes if n.name == "gpu-a100-01")
    assert not a100.eligible and a100.reason == "scheduling.selector-mismatch"
    assert a100.blocking == "label nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3"


def test_nothing_is_cut_at_hundreds_of_nodes_and_text_reports_do_not_build_it() -> None:
    nodes = [node(f"g{i:03d}", gpus=8) for i in range(300)]
    taint = {"key": "dedicated", "value": "infer", "effect": "NoSchedule"}
    for n in nodes[:100]:
        n["spec"]["taints"] = [taint]
    busy = [
        pod(f"b{i:03d}", node_name=f"g{i:03d}", gpus=8, phase="Running") for i in range(100, 300)
    ]
    src = cluster(*nodes, *[operator_pods(f"g{i:03d}") for i in range(300)], *busy, pod("train"))
    report = triage(src, namespace="team-a", name="train", nodes=True)
    assert report.nodes is not None and len(report.nodes) == 300
    tainted = [n for n in report.nodes if n.reason == "scheduling.untolerated-taint"]
    assert len(tainted) == 100 and {n.blocking for n in tainted} == {"taint dedicated"}
    assert sum(n.reason == "scheduling.insufficient" for n in report.nodes) == 200
    assert triage(src, namespace="team-a", name="train").nodes is None
