"""Migrations upgrade, downgrade and upgrade again cleanly, and match the models exactly."""

from __future__ import annotations

import warnings

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from incidents import IncidentStore
from incidents.migrate import head_revision
from incidents.models import Base
from tests.incidents.incident_helpers import make_report


def _tables(store: IncidentStore) -> set[str]:
    return set(inspect(store.engine).get_table_names()) - {"alembic_version"}


def test_upgrade_downgrade_upgrade(db_url: str) -> None:
    with IncidentStore.from_url(db_url) as store:
        assert store.current_revision() is None
        store.upgrade()
        assert store.current_revision() == head_revision() == "0004"
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
        assert store.current_revision() == "0004"
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
        assert store.current_revision() == "0004"


def test_incidents_survive_a_downgrade_to_0001_and_the_upgrade_back(db_url: str) -> None:
    with IncidentStore.from_url(db_url) as store:
        store.upgrade()
        store.record(make_report(), requested_by="U1", duration_ms=1)
        store.downgrade(revision="0001")
        assert "incident_groups" not in _tables(store) and len(store.list()) == 1
        store.upgrade()
        assert "incident_groups" in _tables(store) and len(store.list()) == 1


def test_runs_recorded_before_0003_read_as_slack_runs_and_survive_the_round_trip(
    db_url: str,
) -> None:
    with IncidentStore.from_url(db_url) as store:
        store.upgrade()
        store.record(make_report(), requested_by="U1", duration_ms=1, source="cli")
        store.downgrade(revision="0002")  # the run's source column goes
        assert "deliveries" not in _tables(store) and len(store.list()) == 1
        store.upgrade()
        [incident] = store.list()
        assert [r.source for r in store.runs(incident.id)] == ["slack"]
