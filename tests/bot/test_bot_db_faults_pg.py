"""The bot over PostgreSQL that fails: tables locked by another session, and the server
frozen behind a stopped proxy (up, but silent). The ack never waits, every command is answered
exactly once, and the records missed are made once the database answers again."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import pytest

from gpu_triage.settings import Settings
from incidents import IncidentStore
from incidents.database import create_store_engine
from incidents.timeouts import Timeouts
from tests.bot.conftest import Bot
from tests.bot.faults import (
    acked_at_once,
    answered_once,
    command,
    mention,
    recorded_keys,
    still_once,
)
from tests.db_faults import FrozenProxy, pg_tables_locked

pytestmark = pytest.mark.postgres

LEASE = 2.0
TIMEOUTS = Timeouts(lock=0.5, statement=1.0, grace=0.5)


@pytest.fixture
def proxy(pg_url: str) -> Iterator[FrozenProxy]:
    url = urlsplit(pg_url)
    p = FrozenProxy(url.hostname or "127.0.0.1", url.port or 5432)
    yield p
    p.close()


@pytest.fixture
def store(pg_url: str, proxy: FrozenProxy) -> Iterator[IncidentStore]:
    """The bot's store reaches PostgreSQL through the proxy, with short timeouts."""
    url = urlsplit(pg_url)
    via = urlunsplit(url._replace(netloc=f"{url.username}@127.0.0.1:{proxy.port}"))
    s = IncidentStore(create_store_engine(via, timeouts=TIMEOUTS))
    s.upgrade()
    yield s
    s.close()


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(update={"job_lease": LEASE, "job_poll": 0.2})


def test_tables_locked_by_another_session_hold_up_no_ack_and_lose_no_command(
    bot: Bot, pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    with pg_tables_locked(pg_url, ["deliveries", "incidents", "triage_runs"]):
        sent = [
            command(bot, "why-pending train-x -n team-a", user="UTENA", channel="DTENA"),
            command(bot, "incidents", user="UTENA", channel="DTENA"),
            mention(bot, "why-pending eval-b -n team-b"),
        ]
        acked_at_once(sent)
        answers = answered_once(bot, sent)
    assert all("Not recorded: the incident database" in a for a in answers)
    assert "127.0.0.1" not in answers[0] + answers[1]  # tenants read the kind of fault only
    assert "answered here without a record" in caplog.text
    bot.fake.wait(lambda: {s.key for s in sent} <= recorded_keys(bot), timeout=15)
    still_once(bot, sent, wait=LEASE + 1)


def test_a_frozen_server_holds_up_no_ack_and_loses_no_command(
    bot: Bot, proxy: FrozenProxy, caplog: pytest.LogCaptureFixture
) -> None:
    answered_once(bot, [command(bot, "incidents")])  # the pool holds a connection now
    proxy.freeze()
    try:
        sent = [
            command(bot, "why-pending train-x -n team-a", user="UTENA", channel="DTENA"),
            mention(bot, "why-pending eval-b -n team-b"),
        ]
        acked_at_once(sent)
        answers = answered_once(bot, sent)
    finally:
        proxy.thaw()
    assert all("Not recorded: the incident database" in a for a in answers)
    assert "answered here without a record" in caplog.text
    bot.fake.wait(lambda: {s.key for s in sent} <= recorded_keys(bot), timeout=20)
    still_once(bot, sent, wait=LEASE + 1)
    later = command(bot, "why-pending train-x -n team-a", user="UTENA", channel="DTENA")
    (answer,) = answered_once(bot, [later])
    assert "Not recorded" not in answer and bot.store.list()[0].name == "train-x"
