"""The bounded tool-calling loop behind `ask` when a chat model is configured.

Bounds: at most `max_steps` model turns, `wall_clock` seconds in total, `tool_timeout` per tool
call, `max_calls_per_step` tool calls per turn. Hitting a bound stops the loop with a plain
message saying which, never a partial guess. The final answer passes the same guard as
summaries: it must agree with every triage verdict the tools produced and cite only names and
numbers from the tool results or the question; otherwise the verdicts are stated directly.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from assist.checks import Checks, report_digest
from assist.guard import layer_agrees, unsupported
from assist.prompting import ASK_SYSTEM
from assist.timeouts import CallTimeout, call_with_timeout

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage
    from langchain_core.tools import BaseTool


@dataclass(frozen=True)
class Limits:
    max_steps: int = 6
    wall_clock: float = 60.0
    tool_timeout: float = 20.0
    max_calls_per_step: int = 4


@dataclass
class LoopResult:
    text: str
    stopped: str | None = None  # "steps" | "time" | "model-error" | "guard" when not answered
    tool_calls: list[str] = field(default_factory=list)
    discarded: str | None = None  # why the guard dropped the model's answer ("guard")


def stop_message(reason: str, *, limits: Limits) -> str:
    return {
        "steps": f"I stopped after {limits.max_steps} steps without an answer. "
        "Try a narrower question, or run `why-pending <pod> -n <namespace>` directly.",
        "time": f"I stopped after {limits.wall_clock:g}s without an answer. "
        "Try again, or run `why-pending <pod> -n <namespace>` directly.",
        "model-error": "The language model could not be reached, so I cannot answer that now. "
        "The `why-pending` command works without it.",
        "no-tools": "The configured language model does not support tool calling, "
        "so I cannot answer that.",
    }[reason]


def run_loop(
    *,
    model: BaseChatModel,
    tools: Sequence[BaseTool],
    checks: Checks,
    question: str,
    limits: Limits | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> LoopResult:
    from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage

    limits = limits or Limits()
    deadline = clock() + limits.wall_clock
    by_name = {t.name: t for t in tools}
    try:
        bound = model.bind_tools(list(tools))
    except NotImplementedError:
        return LoopResult(stop_message("no-tools", limits=limits), stopped="no-tools")
    messages: list[BaseMessage] = [
        SystemMessage(content=ASK_SYSTEM),
        HumanMessage(content=question),
    ]
    result = LoopResult(text="")
    for _ in range(limits.max_steps):
        remaining = deadline - clock()
        if remaining <= 0:
            return _stopped(result, "time", limits)
        try:
            ai: AIMessage = call_with_timeout(
                lambda: bound.invoke(messages), timeout=remaining, name="model"
            )
        except CallTimeout:
            return _stopped(result, "time", limits)
        except Exception:
            return _stopped(result, "model-error", limits)
        messages.append(ai)
        if not ai.tool_calls:
            return _final(result, _content(ai), checks=checks, question=question, messages=messages)
        for call in ai.tool_calls[: limits.max_calls_per_step]:
            call_id = call.get("id") or ""
            tool = by_name.get(call["name"])
            result.tool_calls.append(call["name"])
            if tool is None:
                content = json.dumps({"error": "unknown_tool", "tools": sorted(by_name)})
            else:
                budget = min(limits.tool_timeout, max(0.0, deadline - clock()))
                try:
                    content = str(
                        call_with_timeout(
                            lambda t=tool, a=call["args"]: t.invoke(a),  # type: ignore[misc]
                            timeout=budget,
                            name=call["name"],
                        )
                    )
                except CallTimeout:
                    content = json.dumps({"error": "timeout", "tool": call["name"]})
                except Exception as e:
                    content = json.dumps({"error": "tool_failed", "message": type(e).__name__})
            messages.append(ToolMessage(content=content, tool_call_id=call_id, name=call["name"]))
        for call in ai.tool_calls[limits.max_calls_per_step :]:
            messages.append(
                ToolMessage(
                    content=json.dumps({"error": "too_many_calls"}),
                    tool_call_id=call.get("id") or "",
                    name=call["name"],
                )
            )
    return _stopped(result, "steps", limits)


def _stopped(result: LoopResult, reason: str, limits: Limits) -> LoopResult:
    result.text, result.stopped = stop_message(reason, limits=limits), reason
    return result


def _content(ai: AIMessage) -> str:
    if isinstance(ai.content, str):
        return ai.content
    return " ".join(p if isinstance(p, str) else str(p.get("text", "")) for p in ai.content if p)


def _final(
    result: LoopResult,
    text: str,
    *,
    checks: Checks,
    question: str,
    messages: list[BaseMessage],
) -> LoopResult:
    from langchain_core.messages import ToolMessage

    text = " ".join(text.split())
    seen = (
        question + "\n" + "\n".join(str(m.content) for m in messages if isinstance(m, ToolMessage))
    )
    result.discarded = _why_discarded(text, seen=seen, checks=checks)
    if result.discarded is None:
        result.text = text
        return result
    # The model's wording failed the guard: say what the engine found, in its own words.
    result.stopped = "guard"
    result.text = verdicts_text(checks) or (
        "I could not produce an answer I can stand behind. Try `why-pending <pod> -n "
        "<namespace>` directly."
    )
    return result


def _why_discarded(text: str, *, seen: str, checks: Checks) -> str | None:
    """Why the model's answer cannot be shown, in one clause; None when it passes the guard."""
    if not text:
        return "it was empty"
    bad = unsupported(text, evidence=seen)
    if bad:
        return f"it cited {', '.join(bad[:3])}, which the cluster data it read does not contain"
    if len(checks.reports) == 1:
        layer = checks.reports[0].failing_layer
        if not layer_agrees(text, layer):
            found = f"the {layer.value} layer" if layer is not None else "that nothing blocks it"
            return f"it did not agree with the triage, which found {found}"
    return None


def verdicts_text(checks: Checks) -> str:
    lines = []
    for report in checks.reports:
        d = report_digest(report, operator=checks.caller.operator)
        layer = d["failing_layer"] or "nothing (not blocked)"
        lines.append(f"{d['pod']}: failing layer {layer}. {d['headline']}")
    return "\n".join(lines)
