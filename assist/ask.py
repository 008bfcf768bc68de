"""`ask`: answer a free-form question, with a chat model (tool-calling loop) or without (FAQ).

One entry point for the CLI (`gpu-triage ask`) and Slack (`/gpu ask`). Without a model, which
is the default, the deterministic intent matcher in `assist.faq` answers; with one, the bounded
loop in `assist.loop` does, using the same checks as tools. Either way the caller's access
policy is enforced inside the checks, and a triage verdict is the engine's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from assist.checks import (
    Backend,
    Caller,
    CapacityArgs,
    Checks,
    QuotaStatusArgs,
    Result,
    VerifyNodeArgs,
    WhyPendingArgs,
)
from assist.faq import Intent, cannot_answer, faq_answer, match
from assist.guard import layer_agrees
from assist.language import language
from assist.loop import verdicts_text
from triage import TriageReport
from triage.model import Answer as ReportAnswer
from triage.render import one_line

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

    from assist.loop import Limits

MAX_QUESTION = 2000


@dataclass(frozen=True)
class Answer:
    """What `ask` says. `report` is set when the answer is a triage (render it in full)."""

    text: str
    kind: str  # "faq" | "check" | "triage" | "model" | "unknown" | "error"
    intent: str | None = None
    report: TriageReport | None = None
    # why the language model's answer was dropped and this one given instead (the engine's)
    discarded: str | None = None


@dataclass(frozen=True)
class _Asked:
    """Who asks, where, and how commands are spelled to them."""

    caller: Caller
    default_namespace: str | None
    prefix: str
    cluster: str | None


class Assistant:
    """Answers questions and writes summaries. `model=None` (the default) means no LLM."""

    def __init__(
        self,
        *,
        backend: Backend,
        model: BaseChatModel | None = None,
        limits: Limits | None = None,
        summary_timeout: float = 20.0,
    ) -> None:
        self.backend, self.model, self.limits = backend, model, limits
        self.summary_timeout = summary_timeout

    def ask(
        self,
        question: str,
        *,
        caller: Caller,
        default_namespace: str | None = None,
        prefix: str = "gpu-triage ",
        cluster: str | None = None,
    ) -> Answer:
        """The answer to `question` from `caller`, read from `cluster` (None: the backend's
        default): the one the asker's channel defaults to, in the bot."""
        question = question.strip()
        if not question:
            return Answer(cannot_answer(prefix=prefix), "unknown")
        if len(question) > MAX_QUESTION:
            return Answer(f"That question is too long (over {MAX_QUESTION} characters).", "error")
        asked = _Asked(caller=caller, default_namespace=default_namespace, prefix=prefix,
                       cluster=cluster)  # fmt: skip
        if self.model is not None:
            return self._ask_model(question, asked)
        return self._plain(question, asked)

    def _ask_model(self, question: str, asked: _Asked) -> Answer:
        from assist.loop import run_loop
        from assist.tools import make_tools

        assert self.model is not None
        tools, checks = make_tools(caller=asked.caller, backend=self.backend, cluster=asked.cluster)
        prompt = question
        if asked.default_namespace:
            prompt += f"\n(The asker's default namespace is {asked.default_namespace}.)"
        result = run_loop(
            model=self.model, tools=tools, checks=checks, question=prompt, limits=self.limits
        )
        if result.stopped == "guard":
            why = result.discarded or "it failed the checks"
            return self._overruled(why, checks=checks, question=question, asked=asked)
        if result.stopped is not None:
            return Answer(result.text, "error", intent="model")
        # A question about one pod has an answer the model must agree with, whether or not it
        # asked the triage itself: the engine's verdict.
        plain = self._plain(question, asked)
        if plain.report is not None and not layer_agrees(result.text, plain.report.failing_layer):
            layer = plain.report.failing_layer
            found = f"the {layer.value} layer" if layer is not None else "that nothing blocks it"
            why = f"it did not agree with the triage, which found {found}"
            return Answer(plain.text, plain.kind, plain.intent, plain.report, discarded=why)
        return Answer(result.text, "model", intent="model")

    def _plain(self, question: str, asked: _Asked) -> Answer:
        """The answer without a model: the FAQ, or the checks a matched question asks for."""
        return answer_intent(
            match(question),
            checks=Checks(caller=asked.caller, backend=self.backend, cluster=asked.cluster),
            default_namespace=asked.default_namespace,
            prefix=asked.prefix,
            language=language(question),
        )

    def _overruled(self, why: str, *, checks: Checks, question: str, asked: _Asked) -> Answer:
        """The model's answer failed the guard: answer as if no model were configured (the
        deterministic matcher, or the verdicts the model's own tool calls produced), and say
        that the model's answer was discarded and why."""
        plain = self._plain(question, asked)
        if plain.kind in ("triage", "check", "faq"):
            return Answer(plain.text, plain.kind, plain.intent, plain.report, discarded=why)
        if checks.reports:
            report = checks.reports[0] if len(checks.reports) == 1 else None
            return Answer(verdicts_text(checks), "triage", "model", report, discarded=why)
        return Answer(plain.text, "error", "model", discarded=why)

    def summarize(self, report: TriageReport, *, operator: bool) -> str | None:
        """A guarded 2-3 sentence summary, or None (no model, model failed, or guard said no)."""
        if self.model is None:
            return None
        from assist.summary import summarize
        from assist.timeouts import CallTimeout, call_with_timeout

        model = self.model
        try:
            return call_with_timeout(
                lambda: summarize(model, report, operator=operator),
                timeout=self.summary_timeout,
                name="summary",
            )
        except CallTimeout:
            return None


def answer_intent(
    intent: Intent,
    *,
    checks: Checks,
    default_namespace: str | None,
    prefix: str,
    language: str = "en",
) -> Answer:
    """Run what a matched intent asks for (the no-model path); an FAQ answer in `language`
    when the FAQ has it."""
    kind = intent.kind
    if kind.startswith("faq-"):
        return Answer(faq_answer(kind, prefix=prefix, language=language), "faq", intent=kind)
    if kind == "why-pending":
        namespace = intent.namespace or default_namespace
        if intent.name is None or namespace is None:
            what = "pod" if intent.name is None else "namespace"
            return Answer(
                f"Which {what}? Ask like: why is pod <pod> pending in namespace <namespace>, "
                f"or run `{prefix}why-pending <pod> -n <namespace>`.",
                "error",
                intent=kind,
            )
        got = checks.why_pending_report(WhyPendingArgs(namespace=namespace, name=intent.name))
        if isinstance(got, dict):
            return Answer(_error_text(got), "error", intent=kind)
        return Answer(_verdict(got), "triage", intent=kind, report=got)
    if kind == "verify-node":
        assert intent.name is not None
        return _check(checks.verify_node(VerifyNodeArgs(node=intent.name)), kind, _verify_text)
    if kind == "pending":
        scope = f" -n {intent.namespace}" if intent.namespace else ""
        return Answer(
            f"Run `{prefix}pending{scope}`: every stuck workload you may see, grouped by root "
            "cause.",
            "faq",
            intent=kind,
        )
    if kind == "quota":
        assert intent.namespace is not None
        return _check(
            checks.quota_status(QuotaStatusArgs(namespace=intent.namespace)), kind, _quota_text
        )
    if kind == "capacity":
        return _check(checks.capacity(CapacityArgs(product=intent.product)), kind, _capacity_text)
    return Answer(cannot_answer(prefix=prefix), "unknown", intent="unknown")


def _check(result: Result, kind: str, render: Any) -> Answer:
    if "error" in result:
        return Answer(_error_text(result), "error", intent=kind)
    return Answer(str(render(result)), "check", intent=kind)


def _error_text(result: Result) -> str:
    return str(result.get("message") or result["error"])


def _verdict(report: TriageReport) -> str:
    ref = f"{report.pod.namespace}/{report.pod.name}"
    headline = one_line(report.headline)
    if report.answer == ReportAnswer.UNKNOWN:
        return f"It could not be told why {ref} is not running. {headline}"
    if report.failing_layer is None:
        return f"{ref} is not blocked. {headline}"
    owner = f" Owner: {one_line(report.owner.team)}." if report.owner else ""
    return f"{ref} is blocked at layer {report.failing_layer.value}. {headline}.{owner}"


def _verify_text(r: Result) -> str:
    verdict = "passes" if r["passed"] else f"fails at layer {r['failing_layer']}"
    lines = [f"Node {r['node']} {verdict} (driver {r['driver_strategy']})."]
    lines += [f"• {c['name']}: {c['status']}: {c['summary']}" for c in r["checks"]]
    return "\n".join(lines)


def _quota_text(r: Result) -> str:
    lines = [f"Namespace {r['namespace']}:"]
    for q in r["quotas"]:
        items = ", ".join(f"{k} {v['used']}/{v['hard']}" for k, v in q["items"].items())
        full = f" (exhausted: {', '.join(q['exhausted'])})" if q["exhausted"] else ""
        lines.append(f"• ResourceQuota {q['name']}: {items or 'no GPU items'}{full}")
    for lq in r["local_queues"]:
        lines.append(
            f"• LocalQueue {lq['name']} → ClusterQueue {lq['cluster_queue']}: "
            f"{lq['pending'] or 0} pending, {lq['admitted'] or 0} admitted"
        )
    if len(lines) == 1:
        lines.append("• no ResourceQuota and no Kueue LocalQueue: nothing limits GPUs here")
    return "\n".join(lines)


def _capacity_text(r: Result) -> str:
    if not r["products"]:
        return "No GPU nodes match."
    return "\n".join(
        f"• {p['product']}: {p['free']} free of {p['allocatable']} allocatable "
        f"({p['capacity']} capacity, {p['requested']} requested) on {p['nodes']} node(s)"
        for p in r["products"]
    )
