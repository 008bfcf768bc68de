"""`/gpu ask`: a question in the asker's own words.

Questions about a pod run the one why-pending path, node questions ("is node N ok?") the
verification and "what is stuck (in NS)?" the fleet view, each answered as its command is; the
rest get the FAQ, or the assistant when a model is configured, reading the cluster the asker's
channel is about. The access policy applies inside every check the assistant runs.
"""

from __future__ import annotations

from collections.abc import Callable

from bot.core.chat import Asker
from bot.core.commands import Ask, Pending, VerifyNode, WhyPending
from bot.core.context import Context
from bot.core.fleet import FleetView
from bot.core.nodes import Nodes
from bot.core.why_pending import WhyPendingFlow


class Questions:
    def __init__(
        self, *, ctx: Context, why: WhyPendingFlow, nodes: Nodes, fleet: FleetView
    ) -> None:
        self.ctx, self.why, self.nodes, self.fleet = ctx, why, nodes, fleet

    def ask(self, asker: Asker, cmd: Ask, *, then: Callable[[], None]) -> None:
        """Answer `cmd`; `then` once answered (a pod question: once its shared triage was)."""
        from assist.faq import faq_answer, match
        from assist.language import language

        answered_later = False
        try:
            cluster = self.ctx.cluster_for(asker, None)
            if cluster is None:
                return
            words, assistant = self.ctx.words, self.ctx.assistant
            has_model = assistant is not None and assistant.model is not None
            intent = None if has_model else match(cmd.question)
            if intent is not None and intent.kind == "why-pending" and intent.name is not None:
                self.why.ask(asker, WhyPending(intent.name, intent.namespace, None), then=then)
                answered_later = True
            elif intent is not None and intent.kind == "verify-node" and intent.name is not None:
                self.nodes.verify(asker, VerifyNode(node=intent.name))
            elif intent is not None and intent.kind == "pending":
                self.fleet.pending(asker, Pending(namespace=intent.namespace))
            elif intent is not None and intent.kind.startswith("faq-"):
                faq = faq_answer(
                    intent.kind, prefix=words.command_prefix(), language=language(cmd.question)
                )
                self.ctx.answer(asker, words.ask_answer(faq, trusted=True))
            elif assistant is None:
                self.ctx.say(asker, words.ask_unavailable())
            else:
                viewer = self.ctx.viewer(asker, cluster)
                answer = assistant.ask(
                    cmd.question,
                    caller=viewer,
                    default_namespace=viewer.default_namespace,
                    prefix=words.command_prefix(),
                    cluster=cluster,  # the asker's channel's cluster, not the bot's default
                )
                text = words.ask_answer(answer.text, trusted=answer.kind in ("faq", "unknown"))
                if answer.discarded:
                    text = words.model_overruled(answer.discarded) + "\n" + text
                self.ctx.say(asker, text)
        finally:
            if not answered_later:
                then()
