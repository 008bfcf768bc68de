"""The commands as values, and each verb's arguments parsed into one, or a one-line problem.

Names are validated here, before anything can reach a cluster. Parsing is pure: it knows
nothing of a chat's requests, policy or the engine. Which verbs exist, in which order they
are listed and what runs them is `bot.core.registry`'s.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from triage import validate_cluster, validate_name, validate_namespace
from triage.named import parse_target, with_namespace


class UsageError(ValueError):
    """The command text is malformed. `str(e)` says what was wrong, in one line."""


class _Command:
    """A parsed command. `cluster` is the cluster it names (None: the asker's channel's
    default, else the bot's); a command about no cluster in particular leaves it None."""

    cluster: str | None = None


@dataclass(frozen=True)
class WhyPending(_Command):
    name: str
    namespace: str | None
    cluster: str | None


@dataclass(frozen=True)
class Pending(_Command):
    namespace: str | None = None
    cluster: str | None = None


@dataclass(frozen=True)
class VerifyNode(_Command):
    node: str
    cluster: str | None = None


@dataclass(frozen=True)
class ListIncidents(_Command):
    cluster: str | None = None


@dataclass(frozen=True)
class ShowIncident(_Command):
    incident_id: int


@dataclass(frozen=True)
class ShowStats(_Command):
    cluster: str | None = None


@dataclass(frozen=True)
class ListClusters(_Command):
    pass


@dataclass(frozen=True)
class Help(_Command):
    pass


@dataclass(frozen=True)
class Ask(_Command):
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


# -- each verb's arguments (the words after it) as its command -------------------------------


def why_pending(args: list[str]) -> WhyPending:
    opts = _options("why-pending", args, flags=("-n", "--cluster"), names=1, what="pod name")
    if not opts.names:
        raise UsageError("why-pending needs a pod name")
    named = parse_target(opts.names[0])  # NAME, NS/NAME, KIND/NAME (po, job, deploy, sts, rs)
    namespace = with_namespace(named, opts.namespace)
    return WhyPending(name=named.spelled, namespace=namespace, cluster=opts.cluster)


def pending(args: list[str]) -> Pending:
    opts = _options("pending", args, flags=("-n", "--cluster", "-A"))
    return Pending(namespace=opts.namespace, cluster=opts.cluster)


def verify_node(args: list[str]) -> VerifyNode:
    opts = _options("verify-node", args, flags=("--cluster",), names=1, what="node name")
    if not opts.names:
        raise UsageError("verify-node takes one node name (and optionally --cluster NAME)")
    return VerifyNode(node=validate_name(opts.names[0], what="node name"), cluster=opts.cluster)


def list_incidents(args: list[str]) -> ListIncidents:
    return ListIncidents(cluster=_options("incidents", args, flags=("--cluster",)).cluster)


def show_incident(args: list[str]) -> ShowIncident:
    found = _ID.fullmatch(args[0]) if len(args) == 1 else None
    if found is None or not 0 < int(found.group(1)) <= MAX_ID:
        raise UsageError("incident takes one numeric incident id")
    return ShowIncident(incident_id=int(found.group(1)))


def show_stats(args: list[str]) -> ShowStats:
    return ShowStats(cluster=_options("stats", args, flags=("--cluster",)).cluster)


def list_clusters(args: list[str]) -> ListClusters:
    if args:
        raise UsageError("clusters takes no arguments")
    return ListClusters()


def ask(text: str) -> Ask:
    """A question as typed: free text, where apostrophes and quotes are not shell syntax."""
    question = " ".join(text.split())
    if not question:
        raise UsageError("ask needs a question, e.g. ask why is pod train-0 pending")
    if len(question) > MAX_QUESTION:
        raise UsageError(f"ask takes at most {MAX_QUESTION} characters")
    return Ask(question=question)


def help_(args: list[str]) -> Help:
    return Help()


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
            raise UsageError(f"unknown option {shown(word)}: {verb} takes {_usage(flags)}")
        elif len(opts.names) < names:
            opts.names.append(word)
        elif names:
            raise UsageError(f"{verb} takes one {what}, got also {shown(word)}")
        else:
            raise UsageError(f"{verb} takes {_usage(flags)}, not {shown(word)}")
    return opts


def shown(word: str) -> str:
    return repr(word if len(word) <= 40 else word[:37] + "...")
