"""Alembic, driven from code: `gpu-triage db upgrade`, the bot's auto-migration and the tests.

The scripts live in the top-level `migrations` package and are found through it, so upgrades
work from any working directory. The connection is handed to `env.py` directly; `alembic.ini`
never holds a URL. Alembic is imported on use: most processes never migrate.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Connection

import migrations

if TYPE_CHECKING:
    from alembic.config import Config


def script_location() -> Path:
    return Path(migrations.__file__).resolve().parent


def alembic_config(connection: Connection | None = None) -> Config:
    from alembic.config import Config

    config = Config(str(script_location() / "alembic.ini"))
    config.set_main_option("script_location", str(script_location()))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def upgrade(connection: Connection, *, revision: str = "head") -> None:
    from alembic import command

    command.upgrade(alembic_config(connection), revision)


def downgrade(connection: Connection, *, revision: str) -> None:
    from alembic import command

    command.downgrade(alembic_config(connection), revision)


def current_revision(connection: Connection) -> str | None:
    from alembic.migration import MigrationContext

    return MigrationContext.configure(connection).get_current_revision()


def head_revision() -> str | None:
    from alembic.script import ScriptDirectory

    return ScriptDirectory.from_config(alembic_config()).get_current_head()
