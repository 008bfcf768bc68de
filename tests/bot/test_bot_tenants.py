"""Tenant self-service: no existence leak, operator-only detail redacted, groups cached."""

from __future__ import annotations

import json

from tests.bot.bot_cluster import OTHER_TENANT_POD
from tests.bot.conftest import Bot


def _private_reply(bot: Bot, n: int) -> str:
    bot.fake.wait(lambda: len(bot.fake.of("response")) >= n)
    args = bot.fake.of("response")[n - 1].args
    return str(args.get("text", "")) + json.dumps(args.get("blocks") or [])


def test_other_namespace_answers_exactly_like_a_missing_pod(bot: Bot) -> None:
    # team-b's pod exists; team-a's tenant must not be able to tell.
    bot.slack.command(f"why-pending {OTHER_TENANT_POD} -n team-b", user="UTENA", channel="DTENA")
    exists = _private_reply(bot, 1)
    bot.slack.command("why-pending no-such-pod -n team-b", user="UTENA", channel="DTENA")
    missing = _private_reply(bot, 2)
    bot.slack.command("why-pending no-such-pod -n no-such-ns", user="UTENA", channel="DTENA")
    no_ns = _private_reply(bot, 3)
    assert exists.replace(OTHER_TENANT_POD, "X") == missing.replace("no-such-pod", "X")
    assert missing.replace("team-b", "N") == no_ns.replace("no-such-ns", "N")
    assert bot.service.count == 0  # the cluster was not even asked about team-b for this tenant


def test_tenant_sees_own_pod_without_operator_detail(bot: Bot) -> None:
    bot.slack.command("why-pending train-x -n team-a", user="UTENA", channel="DTENA")
    shown = _private_reply(bot, 1)
    assert "Blocked at scheduling" in shown
    assert "gpu-node-1: 1/1 nvidia.com/gpu allocated" in shown  # aggregated fact: kept
    assert OTHER_TENANT_POD not in shown  # another tenant's pod: redacted
    assert "[operator]" not in shown


def test_operator_private_reply_has_detail(bot: Bot) -> None:
    bot.slack.command("why-pending train-x -n team-a", user="UOPS", channel="DOPS")
    assert OTHER_TENANT_POD in _private_reply(bot, 1)


def test_tenant_channel_post_is_redacted_even_for_an_operator(bot: Bot) -> None:
    bot.slack.command("why-pending train-x -n team-a", user="UOPS", channel="CTEAMA")
    post = bot.fake.wait_posts(1)[0]
    assert post.method == "chat.postMessage"
    assert OTHER_TENANT_POD not in json.dumps(post.args)


def test_usergroup_membership_grants_and_is_cached(bot: Bot) -> None:
    bot.fake.usergroups["STEAMA"] = ["UGROUPIE"]
    for n in (1, 2):  # one after the other: two triages (asked at once they would share one)
        bot.slack.command("why-pending train-x -n team-a", user="UGROUPIE", channel="DG")
        shown = _private_reply(bot, n)
    assert "Blocked at scheduling" in shown
    assert len(bot.fake.of("usergroups.users.list")) == 1  # cached
    assert bot.service.count == 2


def test_tenant_incident_list_hides_other_namespaces(bot: Bot) -> None:
    bot.slack.command("why-pending train-x -n team-a", user="UOPS", channel="DOPS")
    _private_reply(bot, 1)
    inc = bot.store.open_incident_for(cluster="demo", namespace="team-a", name="train-x")
    assert inc is not None
    bot.slack.command("incidents", user="UTENB", channel="DTENB")
    assert "No open incidents" in _private_reply(bot, 2)
    bot.slack.command(f"incident {inc.id}", user="UTENB", channel="DTENB")
    assert f"No incident `{inc.id}`" in _private_reply(bot, 3)
