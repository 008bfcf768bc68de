"""Slack deliveries recorded in the incident database: the first writer of a key answers,
whether the repeat comes to the same process, a restarted one or another replica."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from incidents import IncidentStore


def test_a_key_is_first_once(store: IncidentStore) -> None:
    assert store.deliveries.first_time("event:Ev1") is True
    assert store.deliveries.first_time("event:Ev1") is False
    assert store.deliveries.first_time("trigger:Ev1") is True  # a different kind of key


def test_replicas_racing_on_one_key_let_exactly_one_answer(
    db_url: str, store: IncidentStore
) -> None:
    replicas = [IncidentStore.from_url(db_url) for _ in range(4)]
    try:
        for key in (f"event:race-{i}" for i in range(10)):
            start = threading.Barrier(len(replicas))

            def claim(s: IncidentStore, key: str = key, start: threading.Barrier = start) -> bool:
                start.wait()
                return s.deliveries.first_time(key)

            with ThreadPoolExecutor(len(replicas)) as pool:
                assert sorted(pool.map(claim, replicas)) == [False, False, False, True]
    finally:
        for s in replicas:
            s.close()


def test_a_restarted_store_still_knows_the_key(db_url: str, store: IncidentStore) -> None:
    assert store.deliveries.first_time("event:before-restart")
    with IncidentStore.from_url(db_url) as restarted:
        assert restarted.deliveries.first_time("event:before-restart") is False


def test_a_burst_commits_together_and_each_key_is_first_once(store: IncidentStore) -> None:
    """A hundred deliveries at once, ten copies of each of ten keys, in one process: the group
    commit gives each key exactly one True, and takes fewer commits than deliveries."""
    keys = [f"event:burst-{i % 10}" for i in range(100)]
    start = threading.Barrier(len(keys))

    def deliver(key: str) -> tuple[str, bool]:
        start.wait()
        return key, store.deliveries.first_time(key)

    with ThreadPoolExecutor(len(keys)) as pool:
        results = list(pool.map(deliver, keys))
    firsts = sorted(k for k, first in results if first)
    assert firsts == sorted({*keys})
    assert store.deliveries._commits < len(keys)
