"""Parsing `/gpu …` text (and `@bot …` mentions) into a command value, or a one-line problem.

Names are validated here, before anything can reach a cluster. Parsing is pure: it knows
nothing of Slack requests, policy or the engine.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field

from triage import InvalidNameError, validate_cluster, validate_name, validate_namespace


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
    cluster: str | None = None


@dataclass(frozen=True)
class ShowIncident:
    incident_id: int


@dataclass(frozen=True)
class ShowStats:
    cluster: str | None = None


@dataclass(frozen=True)
class ListClusters:
    pass


@dataclass(frozen=True)
class Help:
    pass


@dataclass(frozen=True)
class Ask:
    question: str


Command = (
    WhyPending
    | Pending
    | VerifyNode
    | ListIncidents
    | ShowIncident
    | ShowStats
    | ListClusters
    | Help
    | Ask
)
MAX_QUESTION = 2000
MAX_TEXT = 3000  # a whole command; the longest sensible one is an `ask` question
MAX_ID = 2**63 - 1  # incident ids are 64-bit integers in the database
_ID = re.compile(r"#?([0-9]{1,30})")  # ASCII digits only: "²" and "١" are digits to isdigit()


def parse(text: str) -> Command:
    """Parse the text after `/gpu`. Raises `UsageError` or `InvalidNameError` (both one line)."""
    if len(text) > MAX_TEXT:
        raise UsageError(f"the command is {len(text)} characters long; at most {MAX_TEXT}")
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
        opts = _options(verb, args, flags=("-n", "--cluster"), names=1, what="pod name")
        if not opts.names:
            raise UsageError("why-pending needs a pod name")
        name = validate_name(opts.names[0])
        return WhyPending(name=name, namespace=opts.namespace, cluster=opts.cluster)
    if verb == "pending":
        opts = _options(verb, args, flags=("-n", "--cluster", "-A"))
        return Pending(namespace=opts.namespace, cluster=opts.cluster)
    if verb == "verify-node":
        opts = _options(verb, args, flags=("--cluster",), names=1, what="node name")
        if not opts.names:
            raise UsageError("verify-node takes one node name (and optionally --cluster NAME)")
        return VerifyNode(node=validate_name(opts.names[0], what="node name"), cluster=opts.cluster)
    if verb == "incidents":
        return ListIncidents(cluster=_options(verb, args, flags=("--cluster",)).cluster)
    if verb == "incident":
        found = _ID.fullmatch(args[0]) if len(args) == 1 else None
        if found is None or not 0 < int(found.group(1)) <= MAX_ID:
            raise UsageError("incident takes one numeric incident id")
        return ShowIncident(incident_id=int(found.group(1)))
    if verb == "stats":
        return ShowStats(cluster=_options(verb, args, flags=("--cluster",)).cluster)
    if verb == "clusters":
        if args:
            raise UsageError("clusters takes no arguments")
        return ListClusters()
    raise UsageError(f"unknown command {_shown(verb)}")


@dataclass
class _Options:
    namespace: str | None = None
    cluster: str | None = None
    names: list[str] = field(default_factory=list)


_FLAG_HELP = {
    "-n": "-n NAMESPACE",
    "--cluster": "--cluster NAME",
    "-A": "-A",
}


def _usage(flags: tuple[str, ...]) -> str:
    shown = [_FLAG_HELP[f] for f in flags]
    return shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]


def _options(
    verb: str, args: list[str], *, flags: tuple[str, ...], names: int = 0, what: str = "name"
) -> _Options:
    """kubectl-style options: `-n NS`, `--namespace=NS`, `--cluster NAME`, `-A`, and up to
    `names` positional names, in any order."""
    opts = _Options()
    it = iter(args)
    for word in it:
        flag, eq, inline = word.partition("=")
        flag = {"--namespace": "-n", "--all-namespaces": "-A"}.get(flag, flag)
        if flag in ("-n", "--cluster") and flag in flags:
            value = inline if eq else next(it, None)
            if not value:
                raise UsageError(f"{word.partition('=')[0]} needs a value")
            if flag == "--cluster":
                opts.cluster = validate_cluster(value)
            else:
                opts.namespace = validate_namespace(value)
        elif flag == "-A" and flag in flags and not eq:
            opts.namespace = None  # what you may see is the scope anyway
        elif word.startswith("-"):
            raise UsageError(f"unknown option {_shown(word)}: {verb} takes {_usage(flags)}")
        elif len(opts.names) < names:
            opts.names.append(word)
        elif names:
            raise UsageError(f"{verb} takes one {what}, got also {_shown(word)}")
        else:
            raise UsageError(f"{verb} takes {_usage(flags)}, not {_shown(word)}")
    return opts


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
    "ListClusters",
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
