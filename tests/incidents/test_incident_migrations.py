"""Migrations upgrade, downgrade and upgrade again cleanly, and match the models exactly."""

from __future__ import annotations

import warnings

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect, text

from incidents import IncidentStore, ThreadRef
from incidents.migrate import head_revision
from incidents.models import Base
from tests.incidents.incident_helpers import make_report


def _tables(store: IncidentStore) -> set[str]:
    return set(inspect(store.engine).get_table_names()) - {"alembic_version"}


def _rows(store: IncidentStore, query: str) -> list[tuple[object, ...]]:
    """Raw rows, for a schema older than the models (which read the head's columns)."""
    with store.engine.connect() as conn:
        return [tuple(r) for r in conn.execute(text(query))]


def test_upgrade_downgrade_upgrade(db_url: str) -> None:
    with IncidentStore.from_url(db_url) as store:
        assert store.current_revision() is None
        store.upgrade()
        assert store.current_revision() == head_revision() == "0006"
        assert _tables(store) == {
            "incidents",
            "triage_runs",
            "incident_groups",
            "deliveries",
            "replicas",
        }
        store.record(make_report(), requested_by="U1", duration_ms=1)

        store.downgrade(revision="base")
        assert store.current_revision() is None
        assert _tables(store) == set()

        store.upgrade()
        store.upgrade()  # idempotent
        assert store.current_revision() == "0006"
        assert store.list() == []
        assert store.record(make_report(), requested_by="U1", duration_ms=1).created


def test_models_match_migrations(db_url: str) -> None:
    with IncidentStore.from_url(db_url) as store:
        store.upgrade()
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # a skipped (unreflectable) index must not pass
            with store.engine.connect() as conn:
                context = MigrationContext.configure(conn, opts={"compare_type": True})
                diff = compare_metadata(context, Base.metadata)
    assert diff == []


def test_open_with_auto_migrate(sqlite_url: str, monkeypatch: object) -> None:
    with IncidentStore.open(sqlite_url, auto_migrate=True) as store:
        assert store.current_revision() == "0006"


def test_incidents_survive_a_downgrade_to_0001_and_the_upgrade_back(db_url: str) -> None:
    with IncidentStore.from_url(db_url) as store:
        store.upgrade()
        store.record(make_report(), requested_by="U1", duration_ms=1)
        store.downgrade(revision="0001")
        assert "incident_groups" not in _tables(store)
        assert len(_rows(store, "SELECT id FROM incidents")) == 1
        store.upgrade()
        assert "incident_groups" in _tables(store) and len(store.list()) == 1


def test_runs_recorded_before_0003_read_as_slack_runs_and_survive_the_round_trip(
    db_url: str,
) -> None:
    with IncidentStore.from_url(db_url) as store:
        store.upgrade()
        store.record(make_report(), requested_by="U1", duration_ms=1, source="cli")
        store.downgrade(revision="0002")  # the run's source column goes
        assert "deliveries" not in _tables(store)
        assert len(_rows(store, "SELECT id FROM incidents")) == 1
        store.upgrade()
        [incident] = store.list()
        assert [r.source for r in store.runs(incident.id)] == ["slack"]


def test_slack_threads_become_chat_neutral_references_and_back(db_url: str) -> None:
    with IncidentStore.from_url(db_url) as store:
        store.upgrade(revision="0004")
        with store.engine.begin() as conn:  # what the Slack bot wrote before 0005
            for id_, channel, ts in ((1, "C1", "1700000000.000100"), (2, "C2", None),
                                     (3, None, None)):  # fmt: skip
                conn.execute(
                    text(
                        "INSERT INTO incidents (id, cluster, namespace, kind, name, fingerprint,"
                        " status, headline, opened_at, updated_at, channel, thread_ts, run_count)"
                        " VALUES (:id, 'c', 'ns', 'Pod', :name, 'f', 'open', 'h', :t, :t,"
                        " :channel, :ts, 1)"
                    ),
                    {"id": id_, "name": f"p{id_}", "t": "2026-12-01 10:00:00+00:00",
                     "channel": channel, "ts": ts},
                )  # fmt: skip
        store.upgrade()
        threaded, asked, cli = (store.get(i) for i in (1, 2, 3))
        assert threaded is not None and threaded.thread_ref == ThreadRef(
            chat="slack", channel="C1", thread="1700000000.000100"
        )
        assert asked is not None and (asked.chat, asked.channel, asked.thread) == (
            "slack", "C2", None
        )  # fmt: skip
        assert cli is not None and (cli.chat, cli.channel, cli.thread_ref) == (None, None, None)
        store.attach_thread(3, thread=ThreadRef(chat="matrix", channel="!room:x", thread="$e"))

        store.downgrade(revision="0004")
        assert _rows(store, "SELECT id, channel, thread_ts FROM incidents ORDER BY id") == [
            (1, "C1", "1700000000.000100"),
            (2, "C2", None),
            (3, None, None),  # another chat's thread means nothing to the Slack-only schema
        ]
        store.upgrade()
        back = store.get(1)
        assert back is not None and back.thread_ref == threaded.thread_ref
