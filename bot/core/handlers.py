"""Every command's and button's handler, built once per app over one `Context`; the registry
(`bot.core.registry`) says which runs which command."""

from __future__ import annotations

from dataclasses import dataclass

from bot.core.buttons import Buttons
from bot.core.context import Context
from bot.core.fleet import FleetView
from bot.core.history import History
from bot.core.nodes import Nodes
from bot.core.questions import Questions
from bot.core.why_pending import WhyPendingFlow
from bot.core.work import Flights


@dataclass(frozen=True)
class Handlers:
    ctx: Context
    why: WhyPendingFlow
    nodes: Nodes
    history: History
    fleet: FleetView
    questions: Questions
    buttons: Buttons

    @classmethod
    def build(cls, ctx: Context, *, flights: Flights) -> Handlers:
        why, nodes = WhyPendingFlow(ctx=ctx, flights=flights), Nodes(ctx=ctx)
        fleet = FleetView(ctx=ctx)
        return cls(
            ctx=ctx,
            why=why,
            nodes=nodes,
            history=History(ctx=ctx),
            fleet=fleet,
            questions=Questions(ctx=ctx, why=why, nodes=nodes, fleet=fleet),
            buttons=Buttons(ctx=ctx, why=why),
        )
