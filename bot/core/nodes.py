"""`/gpu verify-node` and `/gpu clusters`: what the bot can tell about nodes and clusters
rather than workloads."""

from __future__ import annotations

from dataclasses import replace

from bot.core.chat import Asker
from bot.core.commands import VerifyNode
from bot.core.context import Context
from triage import InvalidNameError, NotFoundError, SourceError


class Nodes:
    def __init__(self, *, ctx: Context) -> None:
        self.ctx = ctx

    def verify(self, asker: Asker, cmd: VerifyNode) -> None:
        """The node verification template, for operators."""
        words = self.ctx.words
        if not self.ctx.viewer(asker).operator:
            self.ctx.say(asker, words.operator_only())
            return
        cluster = self.ctx.cluster_for(asker, cmd.cluster)
        if cluster is None:
            return
        try:
            result = self.ctx.service.verify(cluster=cluster, node=cmd.node)
        except NotFoundError:
            self.ctx.say(asker, words.node_not_found(cmd.node))
            return
        except (InvalidNameError, SourceError, LookupError) as e:
            self.ctx.say(asker, self.ctx.failure(e, detail=True))  # operators only
            return
        self.ctx.say(asker, words.verification(result))

    def clusters(self, asker: Asker) -> None:
        """The clusters this bot serves (with its other replicas) and the state of their
        caches; operators also see sizes and what is failing (server addresses may appear
        there)."""
        operator = self.ctx.viewer(asker).operator
        found = [*self.ctx.service.clusters(), *self.ctx.remote_clusters()]
        if not found:
            self.ctx.say(asker, self.ctx.words.no_clusters())
            return
        default = self.ctx.cluster_for(asker, None)
        lines = [
            self.ctx.words.cluster_line(
                c if operator else replace(c, detail=""), default=c.name == default, sizes=operator
            )
            for c in found
        ]
        self.ctx.say(asker, "\n".join(lines))
