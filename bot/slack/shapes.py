"""The shapes of the Slack requests the bot accepts, checked before bolt or a listener sees one.

bolt reads a request's fields loosely (`payload["authorizations"][0]`, `team.get("id")`) and
our listeners index into them (`body["actions"][0]`), so a signed body of the wrong shape
(`payload=[1,2]`, an action payload with no actions, a `user` that is a list) used to end as
HTTP 500. Here each accepted kind of request is described once: the fields bolt's context
extraction and our listeners read must have the types Slack sends, and the fields a kind
cannot do without must be there. Fields not named are allowed (Slack adds new ones).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

Spec = Any  # a type, None, an `Obj`, a `ListOf`, or a tuple of alternatives


@dataclass(frozen=True)
class Obj:
    """A JSON object whose named fields, when present, match their specs."""

    fields: dict[str, Spec]
    required: frozenset[str] = field(default_factory=frozenset)


@dataclass(frozen=True)
class ListOf:
    item: Spec
    min_items: int = 0


def _ref(**extra: Spec) -> Obj:
    """An object naming something by id (a user, a channel, a team)."""
    return Obj({"id": str, "team_id": str, "enterprise_id": (str, None), "name": str, **extra})


_ID = (str, None, _ref())
_WHO = Obj(_ref().fields, frozenset({"id"}))  # a user or channel that must name its id
# fmt: off
_MESSAGE = Obj(
    {"ts": str, "thread_ts": str, "user": str, "bot_id": str, "text": str, "channel": _ID,
     "blocks": ListOf(dict)}
)
EVENT = Obj(
    {"type": str, "user": str, "channel": _ID, "text": str, "ts": str, "thread_ts": str,
     "event_ts": str, "team": str, "user_team": str, "user_id": str, "channel_id": str,
     "message": _MESSAGE, "previous_message": _MESSAGE, "item": Obj({"channel": _ID}),
     "bot_access_token": str, "function_execution_id": str, "inputs": dict},
    required=frozenset({"type"}),
)
ACTION = Obj(
    {"action_id": str, "value": str, "type": str, "block_id": str, "action_ts": str},
    required=frozenset({"action_id"}),
)
# Every field bolt's context extraction or our listeners read, wherever it appears.
COMMON = Obj(
    {"type": str, "token": str, "team_id": str, "enterprise_id": (str, None), "api_app_id": str,
     "user_id": str, "channel_id": str, "trigger_id": str, "response_url": str, "text": str,
     "command": str, "event_id": str, "challenge": str, "thread_ts": str,
     "context_team_id": (str, None), "context_enterprise_id": (str, None),
     "team": _ID, "enterprise": _ID, "user": (str, _ref()), "channel": (str, _ref()),
     "is_enterprise_install": (bool, str), "is_ext_shared_channel": bool,
     "authorizations": ListOf(Obj({"team_id": (str, None), "enterprise_id": (str, None),
                                   "user_id": str, "is_bot": bool,
                                   "is_enterprise_install": bool})),
     "event": EVENT, "message": (None, _MESSAGE), "previous_message": _MESSAGE,
     "item": Obj({"channel": _ID}), "view": Obj({"team_id": (str, None),
                                                 "app_installed_team_id": (str, None)}),
     "assistant_thread": Obj({"channel_id": str, "thread_ts": str}),
     "function_execution_id": str, "function_data": Obj({"execution_id": str, "inputs": dict}),
     "bot_access_token": str, "response_urls": ListOf(Obj({"response_url": str})),
     "actions": ListOf(ACTION),
     "container": Obj({"type": str, "channel_id": str, "message_ts": str, "thread_ts": str,
                       "is_ephemeral": bool})}
)
# fmt: on
# What each kind cannot do without, beyond COMMON.
KINDS: dict[str, Obj] = {
    "command": Obj({}, frozenset({"command", "user_id"})),
    "url_verification": Obj({}, frozenset({"challenge"})),
    "event_callback": Obj({}, frozenset({"event", "event_id"})),
    "app_mention": Obj(
        {"event": Obj({}, frozenset({"user", "channel", "text", "ts"}))}, frozenset({"event"})
    ),
    "block_actions": Obj(
        {"actions": ListOf(ACTION, min_items=1), "user": _WHO, "channel": _WHO},
        frozenset({"actions", "user"}),
    ),
}


def kind(body: dict[str, Any]) -> str | None:
    """Which accepted kind `body` is (None: a kind the bot does not handle)."""
    if "ssl_check" in body:
        return "ssl_check"
    if "command" in body:
        return "command"
    what = body.get("type")
    if what == "event_callback":
        event = body.get("event")
        is_mention = isinstance(event, dict) and event.get("type") == "app_mention"
        return "app_mention" if is_mention else "event_callback"
    return what if what in ("url_verification", "block_actions") else None


def problem(body: dict[str, Any], what: str) -> str | None:
    """What is wrong with `body` as a request of kind `what`, in a few words; None if fine."""
    found = _check(body, COMMON, "body")
    if found is None and what in KINDS:
        found = _check(body, KINDS[what], "body")
    if found is None and what == "app_mention":
        found = _check(body, KINDS["event_callback"], "body")
    return found


def _check(value: Any, spec: Spec, where: str) -> str | None:
    if isinstance(spec, tuple):
        if any(_check(value, alt, where) is None for alt in spec):
            return None
        return f"{where} has the wrong type"
    if spec is None:
        return None if value is None else f"{where} has the wrong type"
    if isinstance(spec, Obj):
        if not isinstance(value, dict):
            return f"{where} is not an object"
        missing = sorted(spec.required - value.keys())
        if missing:
            return f"{where} lacks {missing[0]}"
        for name, sub in spec.fields.items():
            if name in value:
                found = _check(value[name], sub, f"{where}.{name}")
                if found is not None:
                    return found
        return None
    if isinstance(spec, ListOf):
        if not isinstance(value, list) or len(value) < spec.min_items:
            return f"{where} is not a list of at least {spec.min_items}"
        for i, item in enumerate(value):
            found = _check(item, spec.item, f"{where}[{i}]")
            if found is not None:
                return found
        return None
    if spec is int and isinstance(value, bool):
        return f"{where} has the wrong type"
    return None if isinstance(value, spec) else f"{where} has the wrong type"
