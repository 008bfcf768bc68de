"""Commands as jobs in the incident database: the replica that took one holds it while its
lease is renewed; when the lease lapses another replica serving the job's cluster takes it
over, exactly one of several racing; and one replica only claims the reply."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from incidents import IncidentStore
from incidents.values import NewJob
from tests.incidents.incident_helpers import FakeClock

LEASE = timedelta(seconds=30)
AGE = timedelta(minutes=25)
PAYLOAD = {"text": "why-pending train-x -n team-a", "user_id": "U1", "channel_id": "C1"}


def _job(owner: str = "a") -> NewJob:
    return NewJob(kind="command", payload=PAYLOAD, owner=owner, lease=LEASE)


def test_a_job_is_held_while_its_lease_runs_and_taken_over_after(
    store: IncidentStore, clock: FakeClock
) -> None:
    jobs = store.deliveries
    assert jobs.first_time("trigger:1", _job("a"))
    assert jobs.claim(owner="b", clusters=["east"], lease=LEASE, max_age=AGE) == ([], [])
    clock.advance(seconds=20)
    assert jobs.renew(["trigger:1"], owner="a", lease=LEASE) == {"trigger:1"}
    clock.advance(seconds=20)  # 40 s after the start, 20 s after the renewal: still a's
    assert jobs.claim(owner="b", clusters=["east"], lease=LEASE, max_age=AGE) == ([], [])
    clock.advance(seconds=11)  # a died after its renewal: the lease lapsed
    taken, dropped = jobs.claim(owner="b", clusters=["east"], lease=LEASE, max_age=AGE)
    assert [(j.key, j.kind, j.payload, j.attempts) for j in taken] == [
        ("trigger:1", "command", PAYLOAD, 2)
    ]
    assert dropped == []
    # a, back from a pause, no longer holds it and cannot renew b's lease
    assert jobs.renew(["trigger:1"], owner="a", lease=LEASE) == set()
    assert jobs.claim(owner="c", clusters=["east"], lease=LEASE, max_age=AGE) == ([], [])


def test_the_reply_belongs_to_one_replica(store: IncidentStore) -> None:
    jobs = store.deliveries
    jobs.first_time("trigger:2", _job("a"))
    assert jobs.claim_reply("trigger:2", owner="a")
    assert jobs.claim_reply("trigger:2", owner="a")  # its own further posts
    assert not jobs.claim_reply("trigger:2", owner="b")


def test_answered_jobs_are_done_and_lose_their_payload(
    store: IncidentStore, clock: FakeClock
) -> None:
    jobs = store.deliveries
    jobs.first_time("trigger:3", _job("a"))
    jobs.finish(["trigger:3"])
    clock.advance(minutes=5)
    assert jobs.claim(owner="b", clusters=[], lease=LEASE, max_age=AGE) == ([], [])
    assert jobs.first_time("trigger:3", _job("b")) is False  # still a seen delivery


def test_a_job_handed_off_waits_for_a_replica_serving_its_cluster(
    store: IncidentStore, clock: FakeClock
) -> None:
    jobs = store.deliveries
    jobs.first_time("trigger:4", _job("a"))
    assert not jobs.hand_off("trigger:4", owner="b", cluster="west")  # not b's to give
    assert jobs.hand_off("trigger:4", owner="a", cluster="west")
    assert jobs.claim(owner="c", clusters=["east"], lease=LEASE, max_age=AGE) == ([], [])
    taken, _ = jobs.claim(owner="d", clusters=["east", "west"], lease=LEASE, max_age=AGE)
    assert [(j.key, j.cluster) for j in taken] == [("trigger:4", "west")]


def test_jobs_nobody_can_answer_any_more_are_dropped(
    store: IncidentStore, clock: FakeClock
) -> None:
    jobs = store.deliveries
    jobs.first_time("trigger:old", _job("a"))
    clock.advance(minutes=26)  # Slack's response URL is about to expire: nobody answers
    jobs.first_time("trigger:replied", _job("a"))
    jobs.claim_reply("trigger:replied", owner="a")  # answered, then a died before "done"
    jobs.first_time("trigger:poison", _job("a"))
    dropped: list[str] = []
    for replica in ("b", "c"):  # two replicas took it and died
        clock.advance(minutes=1)
        taken, gone = jobs.claim(owner=replica, clusters=[], lease=LEASE, max_age=AGE)
        assert [j.key for j in taken] == ["trigger:poison"]
        dropped += gone
    assert sorted(dropped) == ["trigger:old", "trigger:replied"]
    clock.advance(minutes=1)
    assert jobs.claim(owner="d", clusters=[], lease=LEASE, max_age=AGE) == ([], ["trigger:poison"])


def test_replicas_racing_for_lapsed_jobs_take_each_exactly_once(
    db_url: str, store: IncidentStore
) -> None:
    for i in range(24):
        store.deliveries.first_time(f"trigger:race-{i}", _job("dead"))
    # The replicas run on the wall clock, months after the fake one: every lease lapsed.
    replicas = [IncidentStore.from_url(db_url) for _ in range(3)]
    start = threading.Barrier(len(replicas))

    def take(n: int) -> list[str]:
        start.wait()
        mine: list[str] = []
        while True:
            taken, _ = replicas[n].deliveries.claim(
                owner=f"r{n}", clusters=[], lease=LEASE, max_age=timedelta(days=3650), limit=4
            )
            if not taken:
                return mine
            mine += [j.key for j in taken]

    try:
        with ThreadPoolExecutor(len(replicas)) as pool:
            got = list(pool.map(take, range(len(replicas))))
    finally:
        for s in replicas:
            s.close()
    every = [key for keys in got for key in keys]
    assert sorted(every) == sorted(f"trigger:race-{i}" for i in range(24))  # none twice


def test_replicas_say_which_clusters_they_serve_until_they_go(
    store: IncidentStore, clock: FakeClock
) -> None:
    book = store.replicas
    status = {"name": "east", "state": "synced", "nodes": 3, "pods": 9, "detail": ""}
    book.beat("r1", started_at=clock(), clusters=[status])
    book.beat("r2", started_at=clock(), clusters=[{**status, "name": "west"}])
    clock.advance(seconds=15)
    book.beat("r2", started_at=clock(), clusters=[{**status, "name": "west"}])
    live = book.live(within=timedelta(seconds=20))
    assert [(r.id, [c["name"] for c in r.clusters]) for r in live] == [
        ("r1", ["east"]),
        ("r2", ["west"]),
    ]
    clock.advance(seconds=10)  # r1 stopped beating 25 s ago
    assert [r.id for r in book.live(within=timedelta(seconds=20))] == ["r2"]
    book.leave("r2")
    assert book.live(within=timedelta(seconds=20)) == []
