"""The bolt app over real HTTP: signatures, probes, ack time, retries."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request

import pytest
from slack_sdk.signature import SignatureVerifier

from bot.slack.server import Server
from bot.slack.testing import SECRET
from gpu_triage.settings import Settings
from tests.bot.conftest import Bot


def test_invalid_signature_is_rejected(bot: Bot) -> None:
    body = bot.slack.command_body("why-pending train-x -n team-a")
    reply = bot.slack.post(
        body,
        content_type="application/x-www-form-urlencoded",
        signature="v0=" + "0" * 64,
    )
    assert reply.status == 401
    time.sleep(0.2)
    assert bot.service.count == 0
    assert bot.fake.posts() == []


def test_signature_with_another_secret_is_rejected(bot: Bot) -> None:
    body = bot.slack.command_body("help")
    ts = str(int(time.time()))
    sig = SignatureVerifier("not-the-secret").generate_signature(timestamp=ts, body=body)
    reply = bot.slack.post(
        body, content_type="application/x-www-form-urlencoded", timestamp=int(ts), signature=sig
    )
    assert reply.status == 401


def test_stale_timestamp_is_rejected(bot: Bot) -> None:
    body = bot.slack.command_body("help")
    old = int(time.time()) - 6 * 60
    sig = SignatureVerifier(SECRET).generate_signature(timestamp=str(old), body=body)
    reply = bot.slack.post(
        body, content_type="application/x-www-form-urlencoded", timestamp=old, signature=sig
    )
    assert reply.status == 401


@pytest.mark.parametrize("stamp", ["abc", "", "1.5", "1e9", " 17", "-1", "9" * 40, "¹²³"])
def test_a_timestamp_that_is_not_a_number_is_unauthorized_not_an_error(
    bot: Bot, stamp: str, caplog: pytest.LogCaptureFixture
) -> None:
    body = bot.slack.command_body("why-pending train-x -n team-a")
    sig = SignatureVerifier(SECRET).generate_signature(timestamp=stamp, body=body)
    reply = bot.slack.post(
        body,
        content_type="application/x-www-form-urlencoded",
        signature=sig,
        headers={"X-Slack-Request-Timestamp": stamp},
    )
    assert reply.status == 401
    assert not [r for r in caplog.records if r.levelname in ("ERROR", "CRITICAL")]
    time.sleep(0.2)
    assert bot.service.count == 0 and bot.fake.posts() == []


def test_not_ready_until_the_cluster_cache_is_synced(bot: Bot) -> None:
    reason: list[str | None] = ["cluster prod: cache still syncing"]
    server = Server(
        bot.app, host="127.0.0.1", port=0, metrics=lambda: (b"", "text/plain"),
        not_ready=lambda: reason[0],
    )  # fmt: skip
    server.start()
    url = f"http://127.0.0.1:{server.port}"
    try:
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(url + "/readyz", timeout=5)
        assert e.value.code == 503 and e.value.read() == b"cluster prod: cache still syncing\n"
        with urllib.request.urlopen(url + "/healthz", timeout=5) as r:
            assert r.status == 200  # alive, just not ready: no restart
        reason[0] = None
        with urllib.request.urlopen(url + "/readyz", timeout=5) as r:
            assert r.status == 200
    finally:
        server.close_http()  # the app belongs to the fixture


def test_http_stops_even_when_its_wake_up_pipe_is_gone(
    bot: Bot, caplog: pytest.LogCaptureFixture
) -> None:
    server = Server(bot.app, host="127.0.0.1", port=0, metrics=lambda: (b"", "text/plain"))
    server.start()
    url = f"http://127.0.0.1:{server.port}/healthz"
    trigger = server.httpd.trigger
    done = threading.Event()
    trigger.pull_trigger(lambda: (trigger.close(), done.set()))  # closed by its own loop
    assert done.wait(5)
    with urllib.request.urlopen(url, timeout=5) as r:
        assert r.status == 200  # still serving, woken by its poll timeout instead
    server.close_http()
    assert server._thread is not None and not server._thread.is_alive()  # ended, not given up on
    assert "wake-up pipe is closed" in caplog.text
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url, timeout=2)  # nothing listens any more


def test_health_and_metrics(bot: Bot) -> None:
    with urllib.request.urlopen(bot.base_url + "/healthz", timeout=5) as r:
        assert r.status == 200
    with urllib.request.urlopen(bot.base_url + "/readyz", timeout=5) as r:
        assert r.status == 200
    bot.slack.command("why-pending train-x -n team-a")
    bot.fake.wait_posts(1)
    with urllib.request.urlopen(bot.base_url + "/metrics", timeout=5) as r:
        text = r.read().decode()
    assert 'gpu_triage_triages_total{layer="scheduling"} 1.0' in text
    assert 'gpu_triage_open_incidents{layer="scheduling"} 1.0' in text


@pytest.mark.parametrize("delay", [5.0])
def test_ack_is_immediate_under_a_5s_triage(bot: Bot) -> None:
    reply = bot.slack.command("why-pending train-x -n team-a")
    print(f"\nack time under a 5 s triage: {reply.seconds * 1000:.1f} ms")
    assert reply.status == 200
    assert reply.seconds < 1.0
    assert "Triaging" in reply.json()["text"]
    assert bot.fake.posts() == []  # the answer is still being worked out
    posts = bot.fake.wait_posts(1, timeout=15)
    assert posts[0].method == "chat.postMessage"
    assert posts[0].args["channel"] == "COPS"


@pytest.mark.parametrize("delay", [1.0])
def test_event_retries_triage_once_and_post_once(bot: Bot) -> None:
    first = bot.slack.mention("why-pending train-x -n team-a", event_id="EvRETRY")
    retry = bot.slack.mention(
        "why-pending train-x -n team-a",
        event_id="EvRETRY",
        headers={"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"},
    )
    assert first.status == retry.status == 200
    bot.fake.wait_posts(1)
    time.sleep(1.5)
    assert bot.service.count == 1
    assert len(bot.fake.posts()) == 1


@pytest.mark.parametrize("delay", [1.0])
def test_askers_of_one_workload_at_once_share_one_triage_and_all_get_it(bot: Bot) -> None:
    """Twelve people asking about the same stuck pod during an incident (more than the pool's
    eight slots) and one asking about another pod: two triages, nobody told "busy",
    everyone answered, one incident per workload."""
    from concurrent.futures import ThreadPoolExecutor

    asks = [("why-pending train-x -n team-a", f"DU{i}") for i in range(12)]
    asks.append(("why-pending eval-b -n team-b", "DOTHER"))
    with ThreadPoolExecutor(len(asks)) as pool:
        replies = list(pool.map(lambda a: bot.slack.command(a[0], channel=a[1]), asks))
    assert all(r.status == 200 and r.seconds < 1.0 for r in replies)
    bot.fake.wait(lambda: len(bot.fake.of("response")) >= len(asks), timeout=15)
    answers = [json.dumps(c.args) for c in bot.fake.of("response")]
    assert not [a for a in answers if "busy" in a.lower()]
    assert sum("train-x" in a for a in answers) == 12 and sum("eval-b" in a for a in answers) == 1
    assert bot.service.count == 2
    assert len(bot.store.list()) == 2


@pytest.mark.parametrize("delay", [0.5])
def test_a_retry_reaching_another_replica_or_a_restarted_bot_is_not_answered_again(
    bot: Bot, settings: Settings
) -> None:
    """The first delivery goes to one bot process, Slack's retry to another one sharing the
    incident database (a second replica, or this one after a restart): one answer."""
    from slack_sdk import WebClient

    from bot.core.policy import AccessPolicy
    from bot.slack.app import create_app
    from bot.slack.testing import SlackSender
    from tests.bot.conftest import POLICY

    other = create_app(
        settings, service=bot.service, store=bot.store,
        policy=AccessPolicy.model_validate(POLICY),
        client=WebClient(token="xoxb-test", base_url=bot.fake.api_url),
    )  # fmt: skip
    server = Server(other, host="127.0.0.1", port=0, metrics=lambda: (b"", "text/plain"))
    server.start()
    try:
        first = bot.slack.mention("why-pending train-x -n team-a", event_id="EvREPLICA")
        to_other = SlackSender(
            url=f"http://127.0.0.1:{server.port}/slack/events", fake_url=bot.fake.url
        )
        retry = to_other.mention(
            "why-pending train-x -n team-a",
            event_id="EvREPLICA",
            headers={"X-Slack-Retry-Num": "1", "X-Slack-Retry-Reason": "http_timeout"},
        )
        assert first.status == retry.status == 200
        bot.fake.wait_posts(1)
        time.sleep(1.0)
        assert bot.service.count == 1 and len(bot.fake.posts()) == 1
    finally:
        server.stop()


def test_command_redelivery_with_same_trigger_runs_once(bot: Bot) -> None:
    for _ in range(3):
        r = bot.slack.command(
            "why-pending train-x -n team-a",
            trigger="trigger-same",
            headers={"X-Slack-Retry-Num": "1"},
        )
        assert r.status == 200
    bot.fake.wait_posts(1)
    time.sleep(0.5)
    assert bot.service.count == 1
    assert len(bot.fake.posts()) == 1
