"""`gpu-triage ask` without a model: node and "what is stuck" questions answer exactly as the
commands they stand for (`verify-node`, `pending`) do, output and exit code alike."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_triage.cli import main

DEMO = str(Path(__file__).parents[2] / "gpu_triage" / "demo" / "cluster.yaml")


@pytest.fixture(autouse=True)
def _no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GPU_TRIAGE_LLM_PROVIDER", raising=False)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main([*argv, "--snapshot", DEMO])
    return code, capsys.readouterr().out


@pytest.mark.parametrize("question", ["is node gpu-a100-01 ok?", "check node gpu-a100-01"])
def test_a_node_question_prints_what_verify_node_prints(
    capsys: pytest.CaptureFixture[str], question: str
) -> None:
    command = _run(capsys, "verify-node", "gpu-a100-01")
    asked = _run(capsys, "ask", question)
    assert asked == command and "gpu-a100-01" in asked[1]


def test_what_is_pending_in_a_namespace_prints_what_pending_prints(
    capsys: pytest.CaptureFixture[str],
) -> None:
    command = _run(capsys, "pending", "-n", "team-nlp")
    asked = _run(capsys, "ask", "what's pending in team-nlp?")
    assert asked == command and "team-nlp/pretrain-13b (Job, 4 GPU" in asked[1]
    assert _run(capsys, "ask", "what is stuck", "-n", "team-nlp") == command


def test_structured_output_of_a_routed_question_is_the_commands(
    capsys: pytest.CaptureFixture[str],
) -> None:
    command = _run(capsys, "pending", "-n", "team-nlp", "-o", "json")
    assert _run(capsys, "ask", "which pods are pending in team-nlp", "-o", "json") == command
