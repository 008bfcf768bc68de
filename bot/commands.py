"""Parsing `/gpu …` text (and `@bot …` mentions) into a command value, or a one-line problem.

Names are validated here, before anything can reach a cluster. Parsing is pure: it knows
nothing of Slack requests, policy or the engine.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from triage import InvalidNameError, validate_name, validate_namespace


class UsageError(ValueError):
    """The command text is malformed. `str(e)` says what was wrong, in one line."""


@dataclass(frozen=True)
class WhyPending:
    name: str
    namespace: str | None
    cluster: str | None


@dataclass(frozen=True)
class Pending:
    namespace: str | None = None
    cluster: str | None = None


@dataclass(frozen=True)
class VerifyNode:
    node: str
    cluster: str | None = None


@dataclass(frozen=True)
class ListIncidents:
    pass


@dataclass(frozen=True)
class ShowIncident:
    incident_id: int


@dataclass(frozen=True)
class ShowStats:
    pass


@dataclass(frozen=True)
class Help:
    pass


@dataclass(frozen=True)
class Ask:
    question: str


Command = WhyPending | Pending | VerifyNode | ListIncidents | ShowIncident | ShowStats | Help | Ask
MAX_QUESTION = 2000


def parse(text: str) -> Command:
    """Parse the text after `/gpu`. Raises `UsageError` or `InvalidNameError` (both one line)."""
    verb, _, rest = text.strip().partition(" ")
    if verb.lower() == "ask":  # free text: apostrophes and quotes are not shell syntax here
        question = " ".join(rest.split())
        if not question:
            raise UsageError("ask needs a question, e.g. ask why is pod train-0 pending")
        if len(question) > MAX_QUESTION:
            raise UsageError(f"ask takes at most {MAX_QUESTION} characters")
        return Ask(question=question)
    try:
        words = shlex.split(text.strip())
    except ValueError as e:
        raise UsageError(f"could not read the command: {e}") from None
    if not words or words[0] in ("help", "-h", "--help"):
        return Help()
    verb, args = words[0].lower(), words[1:]
    if verb == "why-pending":
        return _why_pending(args)
    if verb == "pending":
        return _pending(args)
    if verb == "verify-node":
        cluster = None
        if len(args) == 3 and args[1] == "--cluster":
            args, cluster = args[:1], args[2]
        if len(args) != 1:
            raise UsageError("verify-node takes one node name (and optionally --cluster NAME)")
        return VerifyNode(node=validate_name(args[0], what="node name"), cluster=cluster)
    if verb == "incidents":
        if args:
            raise UsageError("incidents takes no arguments")
        return ListIncidents()
    if verb == "incident":
        if len(args) != 1 or not args[0].lstrip("#").isdigit():
            raise UsageError("incident takes one numeric incident id")
        return ShowIncident(incident_id=int(args[0].lstrip("#")))
    if verb == "stats":
        if args:
            raise UsageError("stats takes no arguments")
        return ShowStats()
    raise UsageError(f"unknown command {_shown(verb)}")


def _why_pending(args: list[str]) -> WhyPending:
    name: str | None = None
    namespace: str | None = None
    cluster: str | None = None
    it = iter(args)
    for word in it:
        if word in ("-n", "--namespace", "--cluster"):
            value = next(it, None)
            if value is None:
                raise UsageError(f"{word} needs a value")
            if word == "--cluster":
                cluster = validate_name(value, what="cluster name")
            else:
                namespace = validate_namespace(value)
        elif word.startswith("--namespace=") or word.startswith("--cluster="):
            flag, _, value = word.partition("=")
            if flag == "--cluster":
                cluster = validate_name(value, what="cluster name")
            else:
                namespace = validate_namespace(value)
        elif word.startswith("-"):
            raise UsageError(f"unknown option {_shown(word)}")
        elif name is None:
            name = validate_name(word)
        else:
            raise UsageError(f"why-pending takes one pod name, got also {_shown(word)}")
    if name is None:
        raise UsageError("why-pending needs a pod name")
    return WhyPending(name=name, namespace=namespace, cluster=cluster)


def _pending(args: list[str]) -> Pending:
    namespace: str | None = None
    cluster: str | None = None
    it = iter(args)
    for word in it:
        flag, eq, inline = word.partition("=")
        if flag in ("-n", "--namespace", "--cluster"):
            value = inline if eq else next(it, None)
            if not value:
                raise UsageError(f"{flag} needs a value")
            if flag == "--cluster":
                cluster = validate_name(value, what="cluster name")
            else:
                namespace = validate_namespace(value)
        elif word in ("-A", "--all-namespaces"):
            namespace = None  # what you may see is the scope anyway
        else:
            raise UsageError(f"pending takes -n NAMESPACE and --cluster NAME, not {_shown(word)}")
    return Pending(namespace=namespace, cluster=cluster)


def _shown(word: str) -> str:
    return repr(word if len(word) <= 40 else word[:37] + "...")


def parse_mention(text: str) -> Command:
    """An `app_mention` text: drop leading `<@U…>` mentions, then parse like a slash command."""
    words = text.strip().split()
    while words and words[0].startswith("<@") and words[0].endswith(">"):
        words.pop(0)
    return parse(" ".join(words))


__all__ = [
    "Ask",
    "Command",
    "Help",
    "InvalidNameError",
    "ListIncidents",
    "Pending",
    "ShowIncident",
    "ShowStats",
    "UsageError",
    "VerifyNode",
    "WhyPending",
    "parse",
    "parse_mention",
]
