"""Incident groups: the fleet view's causes kept in the store, opened, changed and resolved once
whichever replica syncs, and still known after a restart."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from incidents import IncidentStore, ThreadRef
from tests.incidents.incident_helpers import FakeClock
from triage import load_snapshot
from triage.fleet import Group, sweep

FIXTURE = Path(__file__).parents[1] / "fixtures" / "fleet-many-causes.yaml"


@pytest.fixture(scope="module")
def groups() -> list[Group]:
    return sweep(load_snapshot(FIXTURE)).groups


def shrink(group: Group) -> Group:
    return group.model_copy(update={"members": group.members[1:], "workloads": group.workloads - 1})


def test_lifecycle_open_change_resolve_and_silence_between(
    db_url: str, groups: list[Group]
) -> None:
    with IncidentStore.from_url(db_url) as store:
        store.upgrade()
        book = store.groups
        first = book.sync("c1", groups)
        assert sorted(c.kind for c in first) == ["opened"] * len(groups)
        assert book.sync("c1", groups) == []  # the same finding again: nothing to say
        smaller = [shrink(groups[0]), *groups[1:]]
        [changed] = book.sync("c1", smaller)
        assert changed.kind == "changed" and changed.previous_workloads == groups[0].workloads
        assert changed.group.workloads == groups[0].workloads - 1
        [gone] = book.sync("c1", smaller[1:])
        assert gone.kind == "resolved" and gone.group.key == groups[0].key
        assert book.find("c1", groups[0].key) is None
        assert book.counts() == {"open": len(groups) - 1, "resolved": 1}
        # The cause comes back: a new group incident opens.
        again = book.sync("c1", smaller)
        assert [c.kind for c in again] == ["opened"]


def test_a_restarted_bot_finds_its_groups_and_stays_silent(
    sqlite_url: str, groups: list[Group]
) -> None:
    with IncidentStore.from_url(sqlite_url) as store:
        store.upgrade()
        store.groups.sync("c1", groups)
    with IncidentStore.from_url(sqlite_url) as restarted:
        assert restarted.groups.sync("c1", groups) == []
        assert len(restarted.groups.list(status="open")) == len(groups)


def test_clusters_keep_their_groups_apart(db_url: str, groups: list[Group]) -> None:
    with IncidentStore.from_url(db_url) as store:
        store.upgrade()
        store.groups.sync("c1", groups)
        assert len(store.groups.sync("c2", groups[:1])) == 1
        assert store.groups.sync("c1", groups) == []


def test_the_first_post_is_claimed_once(db_url: str, groups: list[Group]) -> None:
    with IncidentStore.from_url(db_url) as store:
        store.upgrade()
        [change, *_] = store.groups.sync("c1", groups)
        gid = change.group.id
        assert store.groups.claim_post(gid, channel="#gpu-infra") is not None
        assert store.groups.claim_post(gid, channel="#gpu-infra") is None
        store.groups.release_post(gid)  # the post failed: a later cycle may try again
        assert store.groups.claim_post(gid, channel="#gpu-infra") is not None
        store.groups.attach_thread(gid, thread=ThreadRef("slack", "#gpu-infra", "1.1"))
        store.groups.release_post(gid)  # posted: releasing is a no-op
        assert store.groups.claim_post(gid, channel="#gpu-infra") is None
        assert store.groups.posts_since("#gpu-infra", change.group.opened_at) == 1


def test_a_claim_left_by_a_replica_that_died_before_posting_is_taken_over(
    db_url: str, groups: list[Group]
) -> None:
    clock = FakeClock()
    with IncidentStore.from_url(db_url) as base:
        base.upgrade()
        store = IncidentStore(base.engine, clock=clock)
        [change, *_] = store.groups.sync("c1", groups)
        gid = change.group.id
        assert store.groups.claim_post(gid, channel="#gpu-infra") is not None  # then it died
        clock.advance(seconds=60)  # the post could still be on its way
        assert store.groups.claim_post(gid, channel="#gpu-infra") is None
        clock.advance(seconds=61)
        assert store.groups.claim_post(gid, channel="#gpu-infra") is not None
        store.groups.attach_thread(gid, thread=ThreadRef("slack", "#gpu-infra", "1.1"))
        clock.advance(hours=1)  # posted: never claimed again, however old
        assert store.groups.claim_post(gid, channel="#gpu-infra") is None


def test_replicas_syncing_at_once_report_each_change_once(db_url: str, groups: list[Group]) -> None:
    stores = [IncidentStore.from_url(db_url) for _ in range(4)]
    stores[0].upgrade()
    barrier = threading.Barrier(len(stores))

    def sync(store: IncidentStore, wanted: list[Group]) -> list[str]:
        barrier.wait()
        return [c.kind for c in store.groups.sync("c1", wanted)]

    try:
        for wanted, kind in ((groups, "opened"), (groups[1:], "resolved")):
            with ThreadPoolExecutor(len(stores)) as pool:
                results = list(pool.map(sync, stores, [wanted] * len(stores)))
            flat = [k for r in results for k in r]
            expected = len(groups) if kind == "opened" else 1
            assert flat == [kind] * expected, results
        assert len(stores[0].groups.list(status="open")) == len(groups) - 1
    finally:
        for s in stores:
            s.close()


def test_incidents_and_stats_commands_show_the_groups(sqlite_url: str, groups: list[Group]) -> None:
    import json
    import subprocess
    import sys

    with IncidentStore.from_url(sqlite_url) as store:
        store.upgrade()
        store.groups.sync("c1", groups)
        store.groups.sync("c1", groups[1:])
        store.groups.sync("c2", groups[:1])  # another cluster the bot serves
    gpu_triage = str(Path(sys.executable).with_name("gpu-triage"))
    listed = subprocess.run(
        [gpu_triage, "incidents", "--groups", "--database-url", sqlite_url],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    head = listed.stdout.splitlines()[0].split()[:5]
    assert head == ["GROUP", "CLUSTER", "STATUS", "LAYER", "CAUSE"]
    assert "NVIDIA driver pods failing" in listed.stdout and "resolved" in listed.stdout
    only_c2 = subprocess.run(
        [gpu_triage, "incidents", "--groups", "--cluster", "c2", "--database-url", sqlite_url],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert [line.split()[1] for line in only_c2.stdout.splitlines()[1:]] == ["c2"]
    stats = subprocess.run(
        [gpu_triage, "stats", "--database-url", sqlite_url, "--format", "json", "--cluster", "c1"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert json.loads(stats.stdout)["groups"] == {"open": len(groups) - 1, "resolved": 1}
