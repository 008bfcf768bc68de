"""`/gpu ask`: a question in the asker's own words.

Questions about a pod run the real why-pending flow and node questions the verification; the
rest get the FAQ, or the assistant when a model is configured. The access policy applies inside
every check the assistant runs.
"""

from __future__ import annotations

from bot.core.commands import Ask, VerifyNode, WhyPending
from bot.core.handlers import Asker, Handlers
from bot.slack import messages as msg


class Questions:
    def __init__(self, *, handlers: Handlers) -> None:
        self.h = handlers

    def ask(self, asker: Asker, cmd: Ask) -> None:
        """A free-form question: pod questions run the real why-pending flow, the rest the FAQ
        or the assistant. Access policy applies inside every check the assistant runs."""
        from assist.faq import faq_answer, match

        cluster = self.h.cluster_for(asker, None)
        if cluster is None:
            return
        viewer = self.h.viewer(asker, cluster)
        has_model = self.h.assistant is not None and self.h.assistant.model is not None
        intent = None if has_model else match(cmd.question)
        if intent is not None and intent.kind == "why-pending" and intent.name is not None:
            self.h.why_pending(asker, WhyPending(intent.name, intent.namespace, None))
            return
        if intent is not None and intent.kind == "verify-node" and intent.name is not None:
            self.h.verify_node(asker, VerifyNode(node=intent.name))
            return
        if intent is not None and intent.kind.startswith("faq-"):
            self.h.say(asker, msg.ask_answer(faq_answer(intent.kind, prefix="/gpu "), trusted=True))
            return
        if self.h.assistant is None:
            self.h.say(asker, msg.ask_unavailable())
            return
        answer = self.h.assistant.ask(
            cmd.question,
            caller=viewer,
            default_namespace=viewer.default_namespace,
            prefix="/gpu ",
            cluster=cluster,  # the asker's channel's cluster, not the bot's default
        )
        text = msg.ask_answer(answer.text, trusted=answer.kind in ("faq", "unknown"))
        if answer.discarded:
            text = msg.model_overruled(answer.discarded) + "\n" + text
        self.h.say(asker, text)
