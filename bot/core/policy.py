"""Who may ask about which namespaces, and who is an operator: access policy as validated data.

A tenant is mapped to namespaces through their chat user id, a user group they belong to, or
the channel they ask in. Operators see every namespace and operator-only detail. Anyone else
sees nothing: a namespace outside their grant answers exactly like a pod that does not exist.

Ids are the chat's own strings. How a chat spells them is its adapter's to check (`IdRules`,
passed to `load_policy`; Slack's in `bot.slack.ids`): the policy itself only needs them
non-empty. User-group membership is looked up through the chat (`UsergroupCache`'s `fetch`)
and cached for a short while, because policy decisions happen on every command.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from triage import InvalidNameError, validate_cluster, validate_namespace

log = logging.getLogger(__name__)

IdKind = Literal["user", "usergroup", "channel"]


class IdRules(Protocol):
    """How one chat spells its ids."""

    def problem(self, kind: IdKind, value: str) -> str | None:
        """Why `value` is not a `kind` id of this chat, in a few words; None when it is."""
        ...


class PolicyError(ValueError):
    """The access policy file is missing or invalid; the message names the file and field."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Principals(_Strict):
    users: list[str] = Field(default_factory=list)
    usergroups: list[str] = Field(default_factory=list)
    channels: list[str] = Field(default_factory=list)

    @field_validator("users")
    @classmethod
    def _users(cls, v: list[str], info: ValidationInfo) -> list[str]:
        return _check_ids(v, kind="user", info=info)

    @field_validator("usergroups")
    @classmethod
    def _groups(cls, v: list[str], info: ValidationInfo) -> list[str]:
        return _check_ids(v, kind="usergroup", info=info)

    @field_validator("channels")
    @classmethod
    def _channels(cls, v: list[str], info: ValidationInfo) -> list[str]:
        return _check_ids(v, kind="channel", info=info)


class Tenant(Principals):
    name: str = Field(min_length=1)
    namespaces: list[str] = Field(min_length=1)
    default_namespace: str | None = None
    # The clusters these namespaces are granted in; empty: every cluster the bot serves.
    # One bot serving several clusters: `ml` in prod-east may belong to another team in lab.
    clusters: list[str] = Field(default_factory=list)

    @field_validator("namespaces")
    @classmethod
    def _namespaces(cls, v: list[str]) -> list[str]:
        try:
            return [validate_namespace(ns) for ns in v]
        except InvalidNameError as e:
            raise ValueError(str(e)) from None

    def model_post_init(self, __context: object) -> None:
        if self.default_namespace is not None and self.default_namespace not in self.namespaces:
            raise ValueError(f"default_namespace {self.default_namespace!r} is not in namespaces")

    @field_validator("clusters")
    @classmethod
    def _clusters(cls, v: list[str]) -> list[str]:
        return _check_clusters(v)

    @property
    def default(self) -> str:
        return self.default_namespace or self.namespaces[0]

    def grants_in(self, cluster: str | None) -> bool:
        """Whether the grant holds in `cluster` (None: a cluster not named yet, so only
        grants that hold everywhere)."""
        return not self.clusters or cluster in self.clusters


AnswerPlace = Literal["ephemeral", "channel", "thread"]


class Defaults(_Strict):
    """Default namespace per channel or user, default cluster per channel (a bot that
    serves several clusters: #gpu-prod-east asks prod-east unless told `--cluster`), and
    where answers go per channel (`answers`; an unlisted channel: as always)."""

    channels: dict[str, str] = Field(default_factory=dict)
    users: dict[str, str] = Field(default_factory=dict)
    clusters: dict[str, str] = Field(default_factory=dict)
    answers: dict[str, AnswerPlace] = Field(default_factory=dict)

    @field_validator("answers")
    @classmethod
    def _answers(cls, v: dict[str, AnswerPlace], info: ValidationInfo) -> dict[str, AnswerPlace]:
        _check_ids(list(v), kind="channel", info=info)
        return v

    @field_validator("clusters")
    @classmethod
    def _clusters(cls, v: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        _check_ids(list(v), kind="channel", info=info)
        _check_clusters(list(v.values()))
        return v


class AccessPolicy(_Strict):
    """The whole policy file. An empty policy lets nobody in except listed operators."""

    operators: Principals = Field(default_factory=Principals)
    tenants: list[Tenant] = Field(default_factory=list)
    defaults: Defaults = Field(default_factory=Defaults)

    @property
    def empty(self) -> bool:
        """Nobody is an operator and nobody a tenant: the bot can answer no one."""
        ops = self.operators
        return not (ops.users or ops.usergroups or ops.channels or self.tenants)

    def usergroups(self) -> set[str]:
        groups = set(self.operators.usergroups)
        for t in self.tenants:
            groups.update(t.usergroups)
        return groups

    def answer_place(self, channel: str | None) -> AnswerPlace | None:
        """Where answers to questions asked in `channel` go: only the asker sees them, in the
        channel, or in a thread; None (unlisted): where they always went."""
        return None if channel is None else self.defaults.answers.get(channel)

    def cluster_for(self, channel: str | None) -> str | None:
        """The channel's default cluster, if the policy names one."""
        return None if channel is None else self.defaults.clusters.get(channel)

    def viewer(
        self,
        *,
        user: str,
        channel: str | None,
        groups_of: Callable[[str], Iterable[str]],
        cluster: str | None = None,
    ) -> Viewer:
        """Resolve what `user` asking in `channel` may see in `cluster` (its name; None
        counts only the grants that hold in every cluster). `groups_of(user)` lists their
        groups."""
        member_of: set[str] | None = None

        def in_groups(wanted: list[str]) -> bool:
            nonlocal member_of
            if not wanted:
                return False
            if member_of is None:
                member_of = set(groups_of(user))
            return bool(member_of.intersection(wanted))

        def matches(p: Principals) -> bool:
            return (
                user in p.users
                or (channel is not None and channel in p.channels)
                or in_groups(p.usergroups)
            )

        operator = matches(self.operators)
        namespaces: set[str] = set()
        default: str | None = self.defaults.users.get(user)
        if default is None and channel is not None:
            default = self.defaults.channels.get(channel)
        tenants = [t for t in self.tenants if t.grants_in(cluster)]
        by_channel = next((t for t in tenants if channel and channel in t.channels), None)
        for tenant in tenants:
            if matches(tenant):
                namespaces.update(tenant.namespaces)
        if default is None and by_channel is not None:
            default = by_channel.default
        if default is None:
            default = next((t.default for t in tenants if user in t.users), None)
        return Viewer(
            user=user,
            operator=operator,
            namespaces=frozenset(namespaces),
            default_namespace=default,
        )

    def audience(self, channel: str, *, cluster: str | None = None) -> Viewer:
        """What everyone in `channel` may see in `cluster` by being there: all of it in an
        operator channel, the namespaces of the tenants that list the channel, else nothing.
        A public answer in a channel shows no more than this."""
        return Viewer(
            user="",
            operator=channel in self.operators.channels,
            namespaces=frozenset(
                ns
                for t in self.tenants
                if channel in t.channels and t.grants_in(cluster)
                for ns in t.namespaces
            ),
            default_namespace=None,
        )


@dataclass(frozen=True)
class Viewer:
    """One user's view: operators see everything, tenants their mapped namespaces."""

    user: str
    operator: bool
    namespaces: frozenset[str]
    default_namespace: str | None

    def may_see(self, namespace: str) -> bool:
        return self.operator or namespace in self.namespaces


def _check_ids(values: list[str], *, kind: IdKind, info: ValidationInfo) -> list[str]:
    """`values`, each a non-empty id that the chat's rules (the validation context's `ids`,
    if any) accept."""
    rules: IdRules | None = (info.context or {}).get("ids")
    for value in values:
        if not value.strip():
            raise ValueError(f"an empty {kind} id")
        problem = None if rules is None else rules.problem(kind, value)
        if problem is not None:
            raise ValueError(problem)
    return values


def _check_clusters(values: list[str]) -> list[str]:
    try:
        return [validate_cluster(v) for v in values]
    except InvalidNameError as e:
        raise ValueError(str(e)) from None


def load_policy(path: str | Path | None, *, ids: IdRules | None = None) -> AccessPolicy:
    """Read and validate the policy file, its ids by the chat's `ids` rules; `None` gives the
    empty policy (operators only)."""
    if path is None:
        return AccessPolicy()
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text(encoding="utf-8"))
    except OSError as e:
        raise PolicyError(f"cannot read access policy {p}: {e.strerror}") from e
    except yaml.YAMLError as e:
        raise PolicyError(f"access policy {p} is not valid YAML: {e}".splitlines()[0]) from e
    try:
        return AccessPolicy.model_validate(data or {}, context={"ids": ids})
    except ValidationError as e:
        err = e.errors()[0]
        where = ".".join(str(x) for x in err["loc"]) or "(top level)"
        msg = str(err["msg"]).removeprefix("Value error, ")
        raise PolicyError(f"access policy {p}: {where}: {msg}") from None


class UsergroupCache:
    """Members of user groups, fetched from the chat (`fetch`) and kept for `ttl` seconds.

    Only the groups the policy names are looked up. A failed lookup counts as "no members"
    (fail closed) and is retried on the next expiry.
    """

    def __init__(
        self,
        *,
        groups: Iterable[str],
        fetch: Callable[[str], list[str]],
        ttl: float = 300.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._groups = sorted(set(groups))
        self._fetch = fetch
        self._ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()
        self._fetching = threading.Lock()
        self._members: dict[str, tuple[float, frozenset[str]]] = {}

    def groups_of(self, user: str) -> list[str]:
        return [g for g in self._groups if user in self._members_of(g)]

    def _members_of(self, group: str) -> frozenset[str]:
        with self._fetching:  # single flight: concurrent misses wait for one lookup
            now = self._clock()
            with self._lock:
                hit = self._members.get(group)
                if hit is not None and now - hit[0] < self._ttl:
                    return hit[1]
            try:
                members = frozenset(self._fetch(group))
            except Exception:  # a chat's errors must not open access: fail closed
                log.warning("user group lookup failed for %s; treating as empty", group)
                members = frozenset()
            with self._lock:
                self._members[group] = (now, members)
            return members
