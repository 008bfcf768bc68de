"""The errors a user can cause or meet, each printable as one line."""

from __future__ import annotations

from incidents.errors import IncidentStoreError
from triage import InvalidNameError, PlaybookError, SourceError


class UserError(Exception):
    """A problem with the command's input or environment, explained in one line."""


# Adapters register their own one-line error types here (e.g. the incident store's).
USER_ERRORS: tuple[type[BaseException], ...] = (
    UserError,
    SourceError,
    InvalidNameError,
    PlaybookError,
    IncidentStoreError,  # database down / not migrated, unknown incident, bad status change
)
