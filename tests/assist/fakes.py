"""Scripted chat models for the assist tests: langchain-core's fakes, made tool-capable.

`GenericFakeChatModel` replies from a script but does not implement `bind_tools`; the loop
needs it, so `ScriptedModel` binds by returning itself and records every prompt it received.
"""

from __future__ import annotations

import functools
import itertools
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import LanguageModelInput
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from pydantic import Field

from gpu_triage.service import TriageService
from triage import MemorySource, load_snapshot

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


class ScriptedModel(GenericFakeChatModel):
    seen: list[list[BaseMessage]] = Field(default_factory=list)
    bound: list[str] = Field(default_factory=list)
    delay: float = 0.0

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        self.bound = [t.name for t in tools if isinstance(t, BaseTool)]
        return self

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        self.seen.append(list(messages))
        if self.delay:
            time.sleep(self.delay)
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)


class QuotaBlamingModel(ScriptedModel):
    """A chat model that blames the namespace quota whatever it is asked, loadable by
    GPU_TRIAGE_LLM_PROVIDER=tests.assist.fakes:QuotaBlamingModel (for `ask` end to end)."""

    model: str = ""

    def __init__(self, **kwargs: Any) -> None:
        reply = "It is waiting for quota: raise the namespace quota."
        super().__init__(messages=itertools.repeat(reply), **kwargs)


def scripted(*replies: AIMessage | str, delay: float = 0.0) -> ScriptedModel:
    it: Iterator[AIMessage | str] = iter(replies)
    return ScriptedModel(messages=it, seen=[], bound=[], delay=delay)


def call(tool: str, /, call_id: str = "c1", **args: Any) -> AIMessage:
    """A model turn that calls one tool."""
    return AIMessage(content="", tool_calls=[{"name": tool, "args": args, "id": call_id}])


@functools.cache
def fixture_source(name: str = "driver-crashloop.yaml") -> MemorySource:
    source = load_snapshot(FIXTURES / name)
    assert isinstance(source, MemorySource)
    return source


def backend(source: MemorySource | None = None) -> TriageService:
    """The service the bot and the CLI read through, over one source."""
    src = source or fixture_source()
    return TriageService(source_for=lambda _cluster: src)
