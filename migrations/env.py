"""Alembic environment of the incident store.

The connection comes from `incidents.migrate` (`config.attributes["connection"]`); when Alembic
is run by hand the URL is resolved like the application resolves it (`DATABASE_URL`, else the
default SQLite file), never from alembic.ini.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from incidents.database import create_store_engine, resolve_url
from incidents.models import Base

config = context.config
target_metadata = Base.metadata


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        compare_type=True,
        render_as_batch=connection.dialect.name == "sqlite",
        transaction_per_migration=False,
    )


def run_offline() -> None:
    context.configure(
        url=config.attributes.get("url") or resolve_url(),
        target_metadata=target_metadata,
        literal_binds=True,
        compare_type=True,
        dialect_opts={"paramstyle": "named"},
    )
    with context.begin_transaction():
        context.run_migrations()


def run_online() -> None:
    connection: Connection | None = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = create_store_engine(config.attributes.get("url") or resolve_url())
    try:
        with engine.connect() as conn:
            _configure(conn)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_offline()
else:
    run_online()
