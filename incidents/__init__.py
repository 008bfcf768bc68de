"""Incident store: SQLAlchemy models and the repository every adapter records triages through.

Adapters use `IncidentStore` and the frozen values below; nothing outside this package touches
SQL or ORM rows. `IncidentStore` is imported on first use: SQLAlchemy and Alembic are slow to
import, and every CLI command imports this package for its error types.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from incidents.errors import (
    IncidentNotFoundError,
    IncidentStoreError,
    InvalidTransitionError,
    StoreUnavailableError,
)
from incidents.values import (
    Incident,
    IncidentStatus,
    RecordResult,
    Resolution,
    Stats,
    ThreadRef,
    TriageRun,
)

if TYPE_CHECKING:
    from incidents.store import IncidentStore


def __getattr__(name: str) -> Any:
    if name == "IncidentStore":
        from incidents.store import IncidentStore

        return IncidentStore
    raise AttributeError(f"module 'incidents' has no attribute {name!r}")


__all__ = [
    "Incident",
    "IncidentNotFoundError",
    "IncidentStatus",
    "IncidentStore",
    "IncidentStoreError",
    "InvalidTransitionError",
    "RecordResult",
    "Resolution",
    "Stats",
    "StoreUnavailableError",
    "ThreadRef",
    "TriageRun",
]
