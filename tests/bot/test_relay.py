"""The relay's gate: when a replica thought dead was only slow, the command still gets one
answer, from whichever replica claimed the reply first."""

from __future__ import annotations

from pathlib import Path

from bot.core.relay import Relay
from incidents import IncidentStore
from incidents.values import Job
from tests.incidents.incident_helpers import FakeClock
from triage import SourceStatus

EAST = SourceStatus(name="east", state="synced", nodes=3, pods=9, detail="")


def test_a_slow_replica_and_its_replacement_answer_once(tmp_path: Path) -> None:
    clock = FakeClock()
    base = IncidentStore.from_url(f"sqlite:///{tmp_path / 'db.sqlite'}")
    base.upgrade()
    store = IncidentStore(base.engine, clock=clock)
    replayed: list[Job] = []
    a = Relay(store=store, served=lambda: [EAST], replay=replayed.append, owner="a", lease=30)
    b = Relay(store=store, served=lambda: [EAST], replay=replayed.append, owner="b", lease=30)

    assert store.deliveries.first_time("trigger:1", a.new_job("command", {"text": "x"}))
    a.hold("trigger:1")
    b.tick()
    assert replayed == []  # a's lease holds
    clock.advance(seconds=31)  # a stalls past its lease without renewing
    b.tick()
    assert [j.key for j in replayed] == ["trigger:1"]

    b_may, a_may = b.gate("trigger:1"), a.gate("trigger:1")
    assert b_may() is True  # b answers first...
    assert a_may() is False  # ...so a, waking up, posts nothing
    assert b_may() is True  # b's further posts for the same command
    b.done("trigger:1")
    b.tick()
    clock.advance(minutes=5)
    replayed.clear()
    a.tick()
    assert replayed == []  # done: nobody takes it again
    base.close()


def test_replicas_learn_which_clusters_the_others_serve(tmp_path: Path) -> None:
    store = IncidentStore.from_url(f"sqlite:///{tmp_path / 'db.sqlite'}")
    store.upgrade()
    west = SourceStatus(name="west", state="syncing", nodes=0, pods=0, detail="listing pods")
    a = Relay(store=store, served=lambda: [EAST], replay=lambda job: None, owner="a", lease=30)
    b = Relay(
        store=store, served=lambda: [EAST, west], replay=lambda job: None, owner="b", lease=30
    )
    b.start()
    a.start()
    try:
        assert a.elsewhere("west") == "b" and a.elsewhere("east") is None
        assert a.remote() == [west]
        assert b.elsewhere("east") is None  # b serves it itself
    finally:
        a.close()
        b.close()
    store.close()
