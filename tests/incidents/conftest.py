"""Fixtures for the incident store: the same tests run on SQLite and on a real PostgreSQL.

PostgreSQL comes from `DATABASE_URL_POSTGRES` (`.ci/with-postgres` starts one). Without it the
postgres-marked tests are skipped locally, but fail in CI (`CI=true`): CI must never pass by
silently not testing PostgreSQL. Each test gets its own PostgreSQL schema, dropped afterwards.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest
from sqlalchemy import create_engine, text

from incidents import IncidentStore
from tests.incidents.incident_helpers import FakeClock, MakeReport, make_report

POSTGRES = pytest.param("postgres", marks=pytest.mark.postgres)
BACKENDS = ["sqlite", POSTGRES]


def postgres_base_url() -> str:
    url = os.environ.get("DATABASE_URL_POSTGRES")
    if url:
        return url
    reason = "DATABASE_URL_POSTGRES is not set (run under .ci/with-postgres to test PostgreSQL)"
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI=true but {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A PostgreSQL URL whose search_path is a fresh, empty schema."""
    base = postgres_base_url()
    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(base)
    try:
        with admin.begin() as conn:
            conn.execute(text(f'CREATE SCHEMA "{schema}"'))
        sep = "&" if "?" in base else "?"
        yield f"{base}{sep}options={quote(f'-csearch_path={schema}')}"
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
    finally:
        admin.dispose()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'incidents.sqlite'}"


@pytest.fixture(params=BACKENDS)
def db_url(request: pytest.FixtureRequest) -> str:
    name = "pg_url" if request.param == "postgres" else "sqlite_url"
    url: str = request.getfixturevalue(name)
    return url


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(db_url: str, clock: FakeClock) -> Iterator[IncidentStore]:
    base = IncidentStore.from_url(db_url)
    s = IncidentStore(base.engine, clock=clock)
    s.upgrade()
    try:
        yield s
    finally:
        s.close()


@pytest.fixture(name="make_report")
def make_report_fixture() -> MakeReport:
    return make_report
