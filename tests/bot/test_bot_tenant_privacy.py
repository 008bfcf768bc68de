"""Tenants see nothing internal: a cluster error names its kind, not the API server or the
service account (operators get those), and `/gpu stats` counts only a tenant's namespaces."""

from __future__ import annotations

from typing import Any

import pytest

from tests.bot.conftest import Bot
from tests.bot.faults import answered_once, command
from triage import ForbiddenError, UnavailableError

API = "https://10.20.30.40:6443"


def _failing(bot: Bot, monkeypatch: pytest.MonkeyPatch, error: Exception) -> None:
    def get(*args: Any, **kw: Any) -> Any:
        raise error

    monkeypatch.setattr(bot.source, "get", get)


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (UnavailableError(f"cannot reach the Kubernetes API at {API}"), "could not be read"),
        (ForbiddenError(verb="get", resource="pods", namespace="team-a"), "may not read"),
    ],
)
def test_a_cluster_error_names_its_kind_to_a_tenant_and_its_detail_to_an_operator(
    bot: Bot, monkeypatch: pytest.MonkeyPatch, error: Exception, kind: str
) -> None:
    _failing(bot, monkeypatch, error)
    tenant = command(bot, "why-pending train-x -n team-a", user="UTENA", channel="DTENA")
    operator = command(bot, "why-pending train-x -n team-a", user="UOPS", channel="DOPS")
    to_tenant, to_operator = answered_once(bot, [tenant, operator])
    assert kind in to_tenant and kind in to_operator
    assert str(error) not in to_tenant and API not in to_tenant and "grant get" not in to_tenant
    assert str(error) in to_operator


def test_stats_count_only_the_namespaces_a_tenant_may_see(bot: Bot) -> None:
    answered_once(bot, [command(bot, "why-pending train-x -n team-a", channel="DOPS")])
    answered_once(bot, [command(bot, "why-pending eval-b -n team-b", channel="DOPS")])
    a, b, ops = answered_once(
        bot,
        [
            command(bot, "stats", user="UTENA", channel="DTENA"),
            command(bot, "stats", user="UTENB", channel="DTENB"),
            command(bot, "stats", user="UOPS", channel="DOPS"),
        ],
    )
    assert "open now: 1" in a and "total: 1" in a and "namespaces you may see" in a
    assert "open now: 1" in b and "total: 1" in b
    assert "open now: 2" in ops and "total: 2" in ops and "root-cause groups" in ops


def test_a_lost_watchs_error_is_for_operators_only(
    bot: Bot, monkeypatch: pytest.MonkeyPatch
) -> None:
    lost = (
        "cluster data may be up to 400s old: lost the watch on pods "
        f"(watch on pods failed: cannot reach the Kubernetes API at {API})"
    )
    monkeypatch.setattr(bot.source, "staleness_note", lambda: lost, raising=False)
    tenant = command(bot, "why-pending train-x -n team-a", user="UTENA", channel="DTENA")
    (to_tenant,) = answered_once(bot, [tenant])
    operator = command(bot, "why-pending eval-b -n team-b", user="UOPS", channel="DOPS")
    (to_operator,) = answered_once(bot, [operator])
    assert "lost the watch on pods" in to_tenant and API not in to_tenant
    assert API in to_operator
