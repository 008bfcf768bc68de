"""Model selection from the environment, and `gpu-triage ask` from a terminal."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from assist.provider import ProviderError, model_from_env
from gpu_triage.cli import main
from tests.assist.fakes import FIXTURES

SNAP = str(FIXTURES / "driver-crashloop.yaml")


def test_no_provider_means_no_model() -> None:
    assert model_from_env({}) is None
    assert model_from_env({"GPU_TRIAGE_LLM_PROVIDER": ""}) is None


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"GPU_TRIAGE_LLM_PROVIDER": "openai"}, "needs GPU_TRIAGE_LLM_MODEL"),
        (
            {"GPU_TRIAGE_LLM_PROVIDER": "openai", "GPU_TRIAGE_LLM_MODEL": "gpt-x"},
            "needs the package langchain-openai: pip install langchain-openai",
        ),
        ({"GPU_TRIAGE_LLM_PROVIDER": "frob", "GPU_TRIAGE_LLM_MODEL": "m"}, "not a known provider"),
        (
            {"GPU_TRIAGE_LLM_PROVIDER": "json:JSONDecoder", "GPU_TRIAGE_LLM_MODEL": "m"},
            "not a langchain-core BaseChatModel",
        ),
    ],
)
def test_bad_configuration_is_one_line(env: dict[str, str], message: str) -> None:
    with pytest.raises(ProviderError) as e:
        model_from_env(env)
    assert message in str(e.value) and "\n" not in str(e.value)


def test_module_class_provider_loads_any_chat_model() -> None:
    env = {
        "GPU_TRIAGE_LLM_PROVIDER": "langchain_core.language_models.fake_chat_models:FakeChatModel",
        "GPU_TRIAGE_LLM_MODEL": "m",
    }
    from langchain_core.language_models.fake_chat_models import FakeChatModel

    assert isinstance(model_from_env(env), FakeChatModel)


def test_cli_missing_provider_package_is_a_one_line_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("GPU_TRIAGE_LLM_PROVIDER", "anthropic")
    monkeypatch.setenv("GPU_TRIAGE_LLM_MODEL", "claude")
    assert main(["ask", "hello"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "pip install langchain-anthropic" in err


def test_cli_json_and_errors(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("GPU_TRIAGE_LLM_PROVIDER", raising=False)
    q = "why is resnet-train-0 pending"
    assert main(["ask", q, "-n", "team-vision", "--snapshot", SNAP, "--format", "json"]) == 0
    out = capsys.readouterr().out
    assert (
        '"failing_layer": "driver"' in out
        and '"kind": "Answer"' in out
        and '"type": "triage"' in out
    )
    assert main(["ask", "why is pod nope-1 pending", "-n", "team-vision", "--snapshot", SNAP]) == 2
    assert "no pod or workload nope-1" in capsys.readouterr().err


def test_cli_subprocess(tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "KUBECONFIG": str(tmp_path / "none")}
    exe = Path(sys.executable).parent / "gpu-triage"
    pod = subprocess.run(
        [str(exe), "ask", "why is pod resnet-train-0 pending in namespace team-vision",
         "--snapshot", SNAP],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert pod.returncode == 0, pod.stderr
    assert "BLOCKED at layer driver" in pod.stdout
    # an FAQ answer needs no cluster at all (no kubeconfig exists here)
    faq = subprocess.run(
        [str(exe), "ask", "GPU Pod Pending一定是Operator部署失败吗？"],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert faq.returncode == 0, faq.stderr
    # asked in Chinese, answered in Chinese (the FAQ has it)
    assert faq.stdout.startswith("不是。GPU Pod Pending 往往不是 Operator 的故障")


def test_ask_with_a_model_that_names_the_wrong_layer_gives_the_engines_answer(
    tmp_path: Path,
) -> None:
    """The model blames quota; the triage found the driver: the answer is the triage's, exit
    0, and stderr says the model's answer was discarded and why."""
    env = {
        "PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
        "PYTHONPATH": str(Path(__file__).parents[2]),
        "GPU_TRIAGE_LLM_PROVIDER": "tests.assist.fakes:QuotaBlamingModel",
        "GPU_TRIAGE_LLM_MODEL": "any",
    }  # fmt: skip
    exe = Path(sys.executable).parent / "gpu-triage"
    question = "why is pod resnet-train-0 pending in namespace team-vision"
    p = subprocess.run(
        [str(exe), "ask", question, "--snapshot", SNAP],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "BLOCKED at layer driver" in p.stdout and "raise the namespace quota" not in p.stdout
    assert "language model's answer was discarded" in p.stderr
    assert "which found the driver layer" in p.stderr
    data = subprocess.run(
        [str(exe), "ask", question, "--snapshot", SNAP, "-o", "json"],
        capture_output=True, text=True, env=env, timeout=60, check=False,
    )  # fmt: skip
    answer = json.loads(data.stdout)
    assert answer["report"]["failing_layer"] == "driver"
    assert "driver layer" in answer["model_answer_discarded"]
