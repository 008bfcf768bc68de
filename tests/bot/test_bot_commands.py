"""Every `/gpu` command and its error replies, through the real app over HTTP."""

from __future__ import annotations

import json

import pytest

from tests.bot.bot_cluster import INJECTION, OTHER_TENANT_POD
from tests.bot.conftest import Bot


def _text(call_args: dict[str, object]) -> str:
    """Everything a user could see in a message: text plus all block text."""
    return str(call_args.get("text", "")) + json.dumps(call_args.get("blocks") or [])


def test_help_is_answered_in_the_ack(bot: Bot) -> None:
    reply = bot.slack.command("help")
    assert reply.status == 200
    body = reply.json()
    assert body["response_type"] == "ephemeral"
    assert "/gpu why-pending <pod>" in body["text"]
    assert bot.service.count == 0


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("frobnicate", "unknown command 'frobnicate'"),
        ("why-pending", "why-pending needs a pod name"),
        ("why-pending Bad_Name", "invalid pod or workload name 'Bad_Name'"),
        ("why-pending widget/x/y", "unknown kind 'widget'"),
        ("why-pending ok -n Team_A", "invalid namespace 'Team_A'"),
        ("why-pending ok -n", "-n needs a value"),
        ("why-pending ok --frob", "unknown option '--frob'"),
        ("why-pending a b", "why-pending takes one pod name"),
        ("verify-node", "verify-node takes one node name"),
        ("incident abc", "incident takes one numeric incident id"),
        ("why-pending 'unclosed", "could not read the command"),
    ],
)
def test_malformed_commands_say_what_was_wrong_and_show_usage(
    bot: Bot, text: str, problem: str
) -> None:
    reply = bot.slack.command(text)
    assert reply.status == 200
    body = reply.json()["text"]
    assert problem in body.replace("\u2060", "")
    assert "*Usage*" in body
    assert bot.service.count == 0  # validated before any cluster call


def test_why_pending_in_a_channel_posts_the_report(bot: Bot) -> None:
    bot.slack.command("why-pending train-x -n team-a", channel="COPS")
    post = bot.fake.wait_posts(1)[0]
    assert post.method == "chat.postMessage"
    blocks = post.args["blocks"]
    assert len(blocks) <= 50
    assert blocks[0]["text"]["text"].startswith("Blocked at scheduling")
    shown = _text(post.args)
    assert "(`scheduling`)" in shown
    assert "workload-owner" in shown and "#gpu-help" in shown
    assert "*Next steps*" in shown
    actions = next(b for b in blocks if b["type"] == "actions")["elements"]
    assert [a["action_id"] for a in actions] == [
        "gpu_rerun", "gpu_resolve", "gpu_ack", "gpu_snooze", "gpu_escalate",
    ]  # fmt: skip
    assert all(len(a["value"]) <= 2000 for a in actions)
    assert all(len(b["text"]["text"]) <= 3000 for b in blocks if b["type"] == "section")
    # the incident remembers its thread: the ts the fake gave the top-level message
    assert bot.thread_of("train-x") == "1700000000.000001"


def test_same_pod_again_replies_in_the_incident_thread(bot: Bot) -> None:
    bot.slack.command("why-pending train-x -n team-a", channel="COPS")
    first = bot.fake.wait_posts(1)[0]
    thread = bot.thread_of("train-x")
    assert first.args.get("thread_ts") is None
    bot.slack.command("why-pending train-x -n team-a", channel="COPS")
    second = bot.fake.wait_posts(2)[1]
    assert second.args["thread_ts"] == thread
    assert len(bot.store.list()) == 1


def test_mrkdwn_from_the_cluster_is_escaped(bot: Bot) -> None:
    bot.slack.command("why-pending train-x -n team-a", channel="COPS")
    post = bot.fake.wait_posts(1)[0]
    shown = _text(post.args)
    assert "<!channel>" not in shown
    assert "<@U999>" not in shown
    assert "<http://evil.example|click>" not in shown
    assert "&lt;!channel&gt;" in shown
    assert "&lt;http://evil.example|click&gt;" in shown
    assert "*bold*" not in shown  # the asterisks are neutralised
    assert INJECTION not in shown


def test_mention_answers_in_its_thread(bot: Bot) -> None:
    bot.slack.mention("why-pending train-x -n team-a", channel="COPS", thread_ts="1600.000001")
    post = bot.fake.wait_posts(1)[0]
    assert post.method == "chat.postMessage"
    assert post.args["thread_ts"] == "1600.000001"
    assert "Blocked at scheduling" in _text(post.args)


def test_malformed_mention_answers_in_thread(bot: Bot) -> None:
    bot.slack.mention("why-pending", channel="COPS", thread_ts="1600.000002")
    post = bot.fake.wait_posts(1)[0]
    assert post.args["thread_ts"] == "1600.000002"
    assert "why-pending needs a pod name" in post.args["text"]


def test_unknown_pod_and_unknown_cluster(bot: Bot) -> None:
    bot.slack.command("why-pending nope -n team-a")
    reply = bot.fake.wait_posts(1)[0]
    assert reply.method == "response"
    assert "No pod or workload named `nope` in namespace `team-a`" in reply.args["text"]
    bot.slack.command("why-pending train-x -n team-a --cluster elsewhere")
    reply = bot.fake.wait_posts(2)[1]
    assert "I don't serve a cluster named `elsewhere`" in reply.args["text"]


def test_missing_namespace_without_default(bot: Bot) -> None:
    bot.slack.command("why-pending train-x", user="UOPS", channel="COPS")
    reply = bot.fake.wait_posts(1)[0]
    assert "Which namespace?" in reply.args["text"]


def test_channel_default_namespace(bot: Bot) -> None:
    bot.fake.not_in_channel.add("CTEAMA")  # bot not invited: falls back to a private reply
    bot.slack.command("why-pending train-x", user="UTENA", channel="CTEAMA")
    reply = bot.fake.wait(lambda: bool(bot.fake.of("response")))
    reply = bot.fake.of("response")[0]
    assert "Blocked at scheduling" in _text(reply.args)
    assert reply.args["response_type"] == "ephemeral"


def test_incidents_incident_and_stats(bot: Bot) -> None:
    bot.slack.command("why-pending train-x -n team-a")
    bot.fake.wait_posts(1)
    inc = bot.store.open_incident_for(cluster="demo", namespace="team-a", name="train-x")
    assert inc is not None
    bot.slack.command("incidents")
    listed = bot.fake.wait_posts(2)[1]
    assert f"`{inc.id}` `team-a/train-x`: scheduling (open)" in listed.args["text"]
    bot.slack.command(f"incident {inc.id}")
    one = bot.fake.wait_posts(3)[2]
    assert "team-a/train-x" in one.args["text"] and "short of free resources" in one.args["text"]
    bot.slack.command("incident 999")
    assert "No incident `999`" in bot.fake.wait_posts(4)[3].args["text"]
    bot.slack.command("stats")
    stats = bot.fake.wait_posts(5)[4].args["text"]
    assert "open now: 1" in stats and "scheduling: 1" in stats


def test_verify_node_is_operator_only_and_runs_the_template(bot: Bot) -> None:
    bot.slack.command("verify-node gpu-node-1", user="UTENA", channel="CTEAMA")
    assert "Only operators" in bot.fake.wait_posts(1)[0].args["text"]
    bot.slack.command("verify-node gpu-node-1", user="UOPS")
    text = bot.fake.wait_posts(2)[1].args["text"]
    assert "Node `gpu-node-1`" in text
    # the test cluster has no RuntimeClass and no validator pod: the template fails the node
    assert "fails at layer `driver`" in text
    assert ":x: *runtimeclass*: RuntimeClass nvidia does not exist" in text
    bot.slack.command("verify-node no-such-node", user="UOPS")
    assert "No node named `no-such-node`" in bot.fake.wait_posts(3)[2].args["text"]


def test_operator_channel_sees_detail(bot: Bot) -> None:
    bot.slack.command("why-pending train-x -n team-a", channel="COPS")
    post = bot.fake.wait_posts(1)[0]
    assert OTHER_TENANT_POD in _text(post.args)


def test_why_pending_takes_kubectl_s_names(bot: Bot) -> None:
    """NAMESPACE/NAME and KIND/NAME, as in the CLI: the same report as NAME -n NAMESPACE."""
    bot.slack.command("why-pending po/team-a/train-x", channel="COPS")
    bot.slack.command("why-pending team-a/train-x", channel="COPS")
    bot.slack.command("why-pending po/train-x -n team-a", channel="COPS")
    posts = bot.fake.wait_posts(3)
    assert all(
        p.args.get("blocks")
        and p.args["blocks"][0]["text"]["text"].startswith("Blocked at scheduling")
        for p in posts
    ), [p.args.get("text") for p in posts]
    assert len(bot.store.list()) == 1  # one workload, one incident, whatever the spelling
