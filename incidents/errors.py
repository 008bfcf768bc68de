"""The incident store's own errors: each one line, never naming a password.

`StoreUnavailableError` is the one adapters must expect at any time (server down, database
locked, bad URL, schema not migrated): the triage answer still reaches the user and the reply
says the record could not be stored. Its `fault` says what kind of fault it was in a word an
adapter can show anyone (a tenant must not read hosts, users or database names); the message
itself, with those, is for operators and logs.
"""

from __future__ import annotations

from enum import StrEnum


class Fault(StrEnum):
    """What kind of database fault a `StoreUnavailableError` is."""

    LOCKED = "locked"  # another writer held the lock past the lock timeout
    TIMEOUT = "timeout"  # a statement ran, or the server stayed silent, past the timeout
    UNREACHABLE = "unreachable"  # no connection (refused, DNS, authentication)
    READ_ONLY = "read-only"  # the database takes no writes (file, directory, replica, grants)
    NOT_INITIALISED = "not-initialised"  # the schema is missing or behind
    GONE = "gone"  # the SQLite file was deleted or moved while in use
    MISCONFIGURED = "misconfigured"  # the URL or a setting cannot be used
    UNAVAILABLE = "unavailable"  # anything else the driver reported


class IncidentStoreError(Exception):
    """Base of the store's errors. `str(e)` is a one-line user-facing message."""


class StoreUnavailableError(IncidentStoreError):
    """The database could not be used. The message names the database without its password."""

    def __init__(self, message: str, *, fault: Fault = Fault.UNAVAILABLE) -> None:
        super().__init__(message)
        self.fault = fault


class IncidentNotFoundError(IncidentStoreError):
    """No incident has that id."""

    def __init__(self, incident_id: int) -> None:
        self.incident_id = incident_id
        super().__init__(f"incident {incident_id} does not exist")


class InvalidTransitionError(IncidentStoreError):
    """A status change the lifecycle open → acknowledged → resolved does not allow."""
