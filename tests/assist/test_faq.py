"""`ask` without a model (the default): the deterministic intent matcher."""

from __future__ import annotations

import pytest

from assist.ask import Assistant
from assist.checks import LocalOperator
from assist.faq import match
from tests.assist.fakes import backend
from triage import Layer


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("The node has no GPU resource after installing the GPU Operator, what now?", "faq-no-gpu"),
        ("K8s GPU Operator部署后节点没有GPU资源怎么办？", "faq-no-gpu"),
        ("Is a Pending GPU pod always an operator failure?", "faq-pending"),
        ("GPU Pod Pending一定是Operator部署失败吗？", "faq-pending"),
        ("Does the GPU Operator suit every GPU node?", "faq-operator-fit"),
        ("GPU Operator适合所有GPU节点吗？", "faq-operator-fit"),
        (
            "What is the relation between the GPU Operator and compute scheduling?",
            "faq-operator-vs-scheduling",
        ),
        ("GPU Operator和算力调度是什么关系？", "faq-operator-vs-scheduling"),
        ("what's the weather like?", "unknown"),
    ],
)
def test_faq_questions(question: str, kind: str) -> None:
    assert match(question).kind == kind
    answer = Assistant(backend=backend()).ask(question, caller=LocalOperator())
    assert answer.intent == kind
    if kind == "unknown":
        assert answer.text.startswith("I cannot answer that")
    else:
        assert answer.kind == "faq" and "gpu-triage " in answer.text


@pytest.mark.parametrize(
    "question",
    [
        "why is pod resnet-train-0 pending in namespace team-vision?",
        "Why is team-vision/resnet-train-0 stuck",
        "why is resnet-train-0 pending in team-vision",
        "为什么 pod resnet-train-0 一直 pending，命名空间 team-vision",
    ],
)
def test_pod_questions_run_why_pending(question: str) -> None:
    intent = match(question)
    assert (intent.kind, intent.name, intent.namespace) == (
        "why-pending",
        "resnet-train-0",
        "team-vision",
    )
    answer = Assistant(backend=backend()).ask(question, caller=LocalOperator())
    assert answer.kind == "triage" and answer.report is not None
    assert answer.report.failing_layer == Layer.DRIVER
    assert "blocked at layer driver" in answer.text


def test_pod_question_without_namespace_uses_the_default_or_asks() -> None:
    a = Assistant(backend=backend())
    q = "why is pod resnet-train-0 pending"
    assert a.ask(q, caller=LocalOperator()).text.startswith("Which namespace?")
    got = a.ask(q, caller=LocalOperator(), default_namespace="team-vision")
    assert got.report is not None and got.report.failing_layer == Layer.DRIVER
    assert a.ask("why is my pod pending?", caller=LocalOperator()).text.startswith("Which pod?")


def test_command_like_questions() -> None:
    a = Assistant(backend=backend())
    cap = a.ask("how many free A100 GPUs are there?", caller=LocalOperator())
    assert cap.kind == "check" and "NVIDIA-A100" in cap.text
    node = a.ask("verify node gpu-a100-01", caller=LocalOperator())
    assert node.kind == "check" and "fails at layer driver" in node.text
    quota = a.ask("what is the GPU quota in namespace team-vision?", caller=LocalOperator())
    assert quota.kind == "check" and quota.text.startswith("Namespace team-vision")
    missing = a.ask("why is pod nope-1 pending in namespace team-vision", caller=LocalOperator())
    assert missing.kind == "error" and "no pod or workload nope-1" in missing.text


@pytest.mark.parametrize(
    ("question", "kind", "name", "namespace"),
    [
        ("is node gpu-a100-01 ok?", "verify-node", "gpu-a100-01", None),
        ("Is node gpu-a100-01 healthy", "verify-node", "gpu-a100-01", None),
        ("check node gpu-h100-01", "verify-node", "gpu-h100-01", None),
        ("what is stuck?", "pending", None, None),
        ("what's pending in team-a", "pending", None, "team-a"),
        ("which pods are stuck in namespace research?", "pending", None, "research"),
        # a named pod is still a pod question, and the FAQ is still the FAQ
        ("is my pod train-0 stuck in team-a?", "why-pending", "train-0", "team-a"),
        ("Is a Pending GPU pod always an operator failure?", "faq-pending", None, None),
    ],
)
def test_node_and_fleet_questions_route_to_their_commands(
    question: str, kind: str, name: str | None, namespace: str | None
) -> None:
    intent = match(question)
    assert (intent.kind, intent.name, intent.namespace) == (kind, name, namespace)
