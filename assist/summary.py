"""A 2-3 sentence plain-language summary of a report, written by a chat model and guarded.

The model sees the report (tenant-safe fields only, unless the audience is operators) as
delimited data, never tokens or the environment. What it writes is kept only if it names the
engine's failing layer (or says nothing blocks), names no other layer as the cause, cites only
names and numbers found in what it was shown, and is short. Anything else, including a model
error, yields None: the reply then simply has no summary.
"""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

from assist.checks import report_digest
from assist.guard import layer_agrees, sentences, unsupported
from assist.prompting import SUMMARY_SYSTEM, as_data, scrub
from triage import TriageReport

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import BaseMessage

log = logging.getLogger(__name__)

MAX_CHARS = 700
MAX_SENTENCES = 4


def report_data(report: TriageReport, *, operator: bool) -> str:
    """The report as the JSON a model may see (scrubbed; `detail` only for operators)."""
    return scrub(json.dumps(report_digest(report, operator=operator), ensure_ascii=False))


def summary_messages(report: TriageReport, *, operator: bool) -> list[BaseMessage]:
    from langchain_core.messages import HumanMessage, SystemMessage

    return [
        SystemMessage(content=SUMMARY_SYSTEM),
        HumanMessage(
            content=as_data(report_data(report, operator=operator))
            + "\nSummarise this triage report in 2 or 3 sentences."
        ),
    ]


def check_summary(text: str, *, report: TriageReport, operator: bool) -> str | None:
    """`text` cleaned up if it passes every check, else None (the reason is logged)."""
    text = " ".join(text.split())
    if not text:
        return None
    problem: str | None = None
    if len(text) > MAX_CHARS or len(sentences(text)) > MAX_SENTENCES:
        problem = "too long"
    elif not layer_agrees(text, report.failing_layer):
        problem = "disagrees with the engine's layer"
    else:
        missing = unsupported(text, evidence=report_data(report, operator=operator))
        if missing:
            problem = f"cites what the report does not contain: {missing[:3]}"
    if problem is not None:
        log.info("summary for %s/%s dropped: %s", report.pod.namespace, report.pod.name, problem)
        return None
    return text


def summarize(model: BaseChatModel, report: TriageReport, *, operator: bool) -> str | None:
    """Ask `model` for a summary of `report`; the guarded text, or None."""
    try:
        reply = model.invoke(summary_messages(report, operator=operator))
    except Exception as e:  # a provider outage must never break the triage reply
        log.warning("summary model failed: %s: %s", type(e).__name__, e)
        return None
    content = reply.content if isinstance(reply.content, str) else _text(reply.content)
    return check_summary(content, report=report, operator=operator)


def _text(parts: list[str | dict[str, object]]) -> str:
    return " ".join(p if isinstance(p, str) else str(p.get("text", "")) for p in parts if p)
