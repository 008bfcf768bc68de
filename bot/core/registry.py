"""Every command the bot answers, in one registry: its verb, how it is typed, what it does, how
its arguments are parsed, and what runs it.

The parser, the dispatcher (`bot.core.dispatch`) and each chat's usage text read this list,
so a new command is its value and parser (`bot.core.commands`), a handler, and one entry here.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from bot.core import commands as c
from bot.core.chat import Asker
from bot.core.commands import Command, UsageError, shown

if TYPE_CHECKING:
    from bot.core.handlers import Handlers
    from bot.core.wording import Words

C = TypeVar("C", bound=Command)
Then = Callable[[], None]


@dataclass(frozen=True)
class Verb(Generic[C]):
    """One command. `run(handlers, asker, command, then)` answers it; `then` is called once
    the asker was answered: by the dispatcher when `run` returns, or by `run` itself (later,
    on another thread) for a verb that `answers_later`."""

    name: str
    synopsis: str  # what follows the verb, as the usage shows it
    summary: str  # what it does, in a few words
    command: type[C]
    parse: Callable[[list[str]], C]  # the words after the verb (a free-text verb: its text)
    run: Callable[[Handlers, Asker, C, Then], None]
    free_text: bool = False  # the rest of the line is the argument, quotes and all
    answers_later: bool = False  # `run` calls `then` itself, once its shared triage answered
    # Runs on the thread that acknowledged the request (a policy check, then a shared
    # triage is joined or started: nothing that waits), else on the worker pool.
    on_listener: bool = False
    at_once: bool = False  # answered in the acknowledgement itself (help)
    acknowledgement: Callable[[Words, C], str] | None = None  # the ack's text, if it has one
    aliases: tuple[str, ...] = ()


VERBS: tuple[Verb[Any], ...] = (
    Verb(
        "why-pending", "<pod> [-n <namespace>] [--cluster <name>]",
        "why a GPU pod or job is not running", c.WhyPending, c.why_pending,
        lambda h, asker, cmd, then: h.why.ask(asker, cmd, then=then),
        answers_later=True, on_listener=True,
        acknowledgement=lambda words, cmd: words.working(
            namespace=cmd.namespace or "…", name=cmd.name
        ),
    ),
    Verb(
        "pending", "[-n <namespace>] [--cluster <name>]",
        "every stuck workload you may see, grouped by root cause", c.Pending, c.pending,
        lambda h, asker, cmd, then: h.fleet.pending(asker, cmd),
    ),
    Verb(
        "verify-node", "<node> [--cluster <name>]", "post-install checks for one GPU node",
        c.VerifyNode, c.verify_node, lambda h, asker, cmd, then: h.nodes.verify(asker, cmd),
    ),
    Verb(
        "incidents", "[--cluster <name>]", "open incidents", c.ListIncidents, c.list_incidents,
        lambda h, asker, cmd, then: h.history.incidents(asker, cmd),
    ),
    Verb(
        "incident", "<id>", "one incident", c.ShowIncident, c.show_incident,
        lambda h, asker, cmd, then: h.history.incident(asker, cmd),
    ),
    Verb(
        "stats", "[--cluster <name>]", "incident counts per layer", c.ShowStats, c.show_stats,
        lambda h, asker, cmd, then: h.history.stats(asker, cmd),
    ),
    Verb(
        "clusters", "", "the clusters I serve and whether their data is current",
        c.ListClusters, c.list_clusters, lambda h, asker, cmd, then: h.nodes.clusters(asker),
    ),
    Verb(
        "ask", "<question>",
        "a question in your own words (the FAQ, or why is pod X pending in namespace Y)",
        c.Ask, lambda args: c.ask(args[0]),
        lambda h, asker, cmd, then: h.questions.ask(asker, cmd, then=then),
        free_text=True, answers_later=True,
    ),
    Verb(
        "help", "", "this message", c.Help, c.help_,
        lambda h, asker, cmd, then: h.ctx.say(asker, h.ctx.words.help_text()),
        at_once=True, aliases=("-h", "--help"),
    ),
)  # fmt: skip

_BY_NAME = {name: v for v in VERBS for name in (v.name, *v.aliases)}
_BY_COMMAND: dict[type[Any], Verb[Any]] = {v.command: v for v in VERBS}
HELP = _BY_NAME["help"]


def verb_of(command: Command) -> Verb[Any]:
    return _BY_COMMAND[type(command)]


def parse(text: str) -> Command:
    """The command `text` types (what follows the chat's command name, or a mention of the
    bot). Raises `UsageError` or `InvalidNameError` (both one line)."""
    if len(text) > c.MAX_TEXT:
        raise UsageError(f"the command is {len(text)} characters long; at most {c.MAX_TEXT}")
    first, _, rest = text.strip().partition(" ")
    free = _BY_NAME.get(first.lower())
    if free is not None and free.free_text:
        question: Command = free.parse([rest])
        return question
    try:
        words = shlex.split(text.strip())
    except ValueError as e:
        raise UsageError(f"could not read the command: {e}") from None
    if not words:
        return c.Help()
    verb = _BY_NAME.get(words[0] if words[0] in HELP.aliases else words[0].lower())
    if verb is None or verb.free_text:
        raise UsageError(f"unknown command {shown(words[0].lower())}")
    parsed: Command = verb.parse(words[1:])
    return parsed


def usage() -> list[tuple[str, str]]:
    """(how it is typed, what it does) for each command, in the order to list them."""
    return [(f"{v.name} {v.synopsis}".strip(), v.summary) for v in VERBS]
