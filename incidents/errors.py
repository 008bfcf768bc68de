"""The incident store's own errors: each one line, never naming a password.

`StoreUnavailableError` is the one adapters must expect at any time (server down, database
locked, bad URL, schema not migrated): the triage answer still reaches the user and the reply
says the record could not be stored.
"""

from __future__ import annotations


class IncidentStoreError(Exception):
    """Base of the store's errors. `str(e)` is a one-line user-facing message."""


class StoreUnavailableError(IncidentStoreError):
    """The database could not be used. The message names the database without its password."""


class IncidentNotFoundError(IncidentStoreError):
    """No incident has that id."""

    def __init__(self, incident_id: int) -> None:
        self.incident_id = incident_id
        super().__init__(f"incident {incident_id} does not exist")


class InvalidTransitionError(IncidentStoreError):
    """A status change the lifecycle open → acknowledged → resolved does not allow."""
