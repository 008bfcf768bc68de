"""How Slack spells its ids, checked where they enter: the access policy and the playbook's
owner routes (the engine's playbook schema and the core's policy take any id; only Slack knows
that a user group is `S…` and a channel `C…`, `G…` or `D…`)."""

from __future__ import annotations

import re
from pathlib import Path

from bot.core.policy import AccessPolicy, IdKind
from bot.core.policy import load_policy as load_any_policy
from triage import Layer, Playbook

USER = re.compile(r"[UW][A-Z0-9]+")
USERGROUP = re.compile(r"S[A-Z0-9]+")
CHANNEL = re.compile(r"[CGD][A-Z0-9]+")
PUBLIC_CHANNEL = re.compile(r"[CG][A-Z0-9]{6,}")  # what `<#…>` links to (a `#name` is text)
DIRECT = "D"  # the first letter of a direct conversation's channel id

_PATTERNS: dict[IdKind, tuple[re.Pattern[str], str]] = {
    "user": (USER, "user id"),
    "usergroup": (USERGROUP, "user group id"),
    "channel": (CHANNEL, "channel id"),
}


class SlackIds:
    """`bot.core.policy.IdRules` for Slack."""

    def problem(self, kind: IdKind, value: str) -> str | None:
        pattern, what = _PATTERNS[kind]
        return None if pattern.fullmatch(value) else f"not a Slack {what}: {value!r}"


SLACK_IDS = SlackIds()


def load_policy(path: str | Path | None) -> AccessPolicy:
    """The access policy file with its ids checked as Slack's (`PolicyError` otherwise)."""
    return load_any_policy(path, ids=SLACK_IDS)


def is_usergroup(value: str | None) -> bool:
    """A user group id Slack can mention (`<!subteam^S…>`)."""
    return value is not None and USERGROUP.fullmatch(value) is not None


class PlaybookIdError(ValueError):
    """A playbook's owner route names a user group that is not a Slack id."""


def check_playbook(playbook: Playbook) -> None:
    """Refuse a playbook whose owner routes name a user group Slack would not know, in one
    line naming the route: the bot mentions it when escalating."""
    routes = [(f"routes.{layer.value}", route) for layer, route in playbook.routes.items()]
    routes += [(f"teams.{name}", route) for name, route in playbook.teams.items()]
    routes += [(f"signal_routes.{code}", route) for code, route in playbook.signal_routes.items()]
    routes += [
        (f"node_pools.routes.{pool}.{Layer(layer).value}", route)
        for pool, by_layer in playbook.node_pools.routes.items()
        for layer, route in by_layer.items()
    ]
    for where, route in routes:
        if route.usergroup is not None and not is_usergroup(route.usergroup):
            raise PlaybookIdError(
                f"playbook {where}.usergroup: not a Slack user group id: {route.usergroup!r}"
            )
