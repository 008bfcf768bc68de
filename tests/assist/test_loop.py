"""`ask` with a model: a bounded tool-calling loop, driven by scripted fake chat models."""

from __future__ import annotations

import itertools

from langchain_core.messages import AIMessage, ToolMessage

from assist.ask import Assistant
from assist.checks import LocalOperator
from assist.loop import Limits
from bot.core.policy import AccessPolicy
from tests.assist.fakes import backend, call, scripted

TENANT = AccessPolicy.model_validate(
    {"tenants": [{"name": "o", "namespaces": ["team-other"], "users": ["UOTH"]}]}
).viewer(user="UOTH", channel=None, groups_of=lambda u: [])
Q = "why is resnet-train-0 pending in team-vision?"


def test_tool_call_then_answer() -> None:
    answer_text = (
        "resnet-train-0 is blocked at the driver layer: the NVIDIA driver pod crashes on "
        "gpu-a100-01 and gpu-a100-02. It routes to gpu-infrastructure."
    )
    model = scripted(
        call("why_pending", namespace="team-vision", name="resnet-train-0"), answer_text
    )
    answer = Assistant(backend=backend(), model=model).ask(Q, caller=LocalOperator())
    assert answer.kind == "model" and answer.text == answer_text
    assert model.bound == ["why_pending", "verify_node", "quota_status", "capacity"]
    tool_msgs = [m for m in model.seen[1] if isinstance(m, ToolMessage)]
    assert len(tool_msgs) == 1 and '"failing_layer":"driver"' in str(tool_msgs[0].content)


def test_answer_contradicting_the_engine_is_replaced_by_the_verdict() -> None:
    model = scripted(
        call("why_pending", namespace="team-vision", name="resnet-train-0"),
        "resnet-train-0 is stuck because the namespace quota is exhausted.",
    )
    answer = Assistant(backend=backend(), model=model).ask(Q, caller=LocalOperator())
    # The engine's answer stands, as without a model, and says why the model's went.
    assert answer.kind == "triage" and answer.report is not None
    assert answer.report.failing_layer is not None and answer.report.failing_layer.value == "driver"
    assert "quota is exhausted" not in answer.text
    assert answer.discarded == "it did not agree with the triage, which found the driver layer"


def test_answer_citing_an_unknown_node_is_replaced() -> None:
    model = scripted(
        call("why_pending", namespace="team-vision", name="resnet-train-0"),
        "The driver on gpu-h100-99 is broken.",
    )
    answer = Assistant(backend=backend(), model=model).ask(Q, caller=LocalOperator())
    assert "gpu-h100-99" not in answer.text and answer.kind == "triage"
    assert answer.discarded is not None and "gpu-h100-99" in answer.discarded


def test_a_wrong_layer_without_asking_the_triage_is_overruled_too() -> None:
    """The model never called a tool and named the wrong layer: the question is about one pod,
    so the engine's verdict is known and the model's answer must agree with it."""
    model = scripted("It is waiting for quota: raise the namespace quota.")
    answer = Assistant(backend=backend(), model=model).ask(Q, caller=LocalOperator())
    assert answer.kind == "triage" and "raise the namespace quota" not in answer.text
    assert answer.discarded is not None and "driver layer" in answer.discarded


def test_a_right_answer_without_tools_is_kept() -> None:
    text = "The NVIDIA driver layer blocks it: the driver pod is failing on its nodes."
    answer = Assistant(backend=backend(), model=scripted(text)).ask(Q, caller=LocalOperator())
    assert answer.kind == "model" and answer.text == text and answer.discarded is None


def test_step_limit_stops_with_a_clear_message() -> None:
    endless = (call("capacity", call_id=f"c{i}") for i in itertools.count())
    model = scripted()
    model.messages = endless
    answer = Assistant(backend=backend(), model=model, limits=Limits(max_steps=3)).ask(
        "how many gpus?", caller=LocalOperator()
    )
    assert answer.kind == "error"
    assert answer.text.startswith("I stopped after 3 steps")
    assert len(model.seen) == 3


def test_wall_clock_limit_stops_a_slow_model() -> None:
    model = scripted("too late", delay=1.0)
    limits = Limits(wall_clock=0.2)
    answer = Assistant(backend=backend(), model=model, limits=limits).ask(
        "anything", caller=LocalOperator()
    )
    assert answer.kind == "error" and answer.text.startswith("I stopped after 0.2s")


def test_tenant_asking_about_another_namespace_gets_not_found() -> None:
    model = scripted(
        call("why_pending", namespace="team-vision", name="resnet-train-0"),
        "I cannot see a pod resnet-train-0 in team-vision.",
    )
    answer = Assistant(backend=backend(), model=model).ask(Q, caller=TENANT)
    tool_msg = next(m for m in model.seen[1] if isinstance(m, ToolMessage))
    assert '"error":"not_found"' in str(tool_msg.content)
    assert "driver" not in str(tool_msg.content)  # nothing of the real verdict leaked
    assert answer.text == "I cannot see a pod resnet-train-0 in team-vision."


def test_unknown_tool_and_model_without_tool_support() -> None:
    from langchain_core.language_models.fake_chat_models import FakeListChatModel

    model = scripted(
        AIMessage(content="", tool_calls=[{"name": "rm_rf", "args": {}, "id": "x"}]), "Sorry."
    )
    answer = Assistant(backend=backend(), model=model).ask("do it", caller=LocalOperator())
    assert "unknown_tool" in str(model.seen[1][-1].content) and answer.text == "Sorry."
    plain = FakeListChatModel(responses=["hi"])  # bind_tools not implemented
    no_tools = Assistant(backend=backend(), model=plain).ask("hi", caller=LocalOperator())
    assert "does not support tool calling" in no_tools.text
