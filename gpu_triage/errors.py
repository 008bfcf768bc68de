"""The errors a user can cause or meet, each printable as one line, and the exit status each
gives (documented in the README: scripts branch on them, as they do on kubectl's)."""

from __future__ import annotations

from gpu_triage.extras import MissingExtraError
from incidents.errors import IncidentStoreError, StoreUnavailableError
from triage import InvalidNameError, PlaybookError, SourceError
from triage.cluster.source import DeadlineExceededError, ReadFailedError
from triage.model import Answer


class UserError(Exception):
    """A problem with the command's input or environment, explained in one line."""


# Adapters register their own one-line error types here (e.g. the incident store's).
USER_ERRORS: tuple[type[BaseException], ...] = (
    UserError,
    SourceError,
    InvalidNameError,
    PlaybookError,
    IncidentStoreError,  # database down / not migrated, unknown incident, bad status change
    MissingExtraError,  # `gpu-triage bot` on an install without the `bot` extra
)

EXIT_OK = 0  # the command completed (a triage ran, whatever it found; checks passed)
EXIT_BLOCKED = 1  # with --exit-code: something is blocked; verify/preflight: a check failed
EXIT_USAGE = 2  # bad flags or input: an invalid name, no such pod, namespace or incident; an
# extra the command needs is not installed
EXIT_CLUSTER = 3  # the cluster could not be read: unreachable, credentials rejected, forbidden
EXIT_STORE = 4  # the incident database is down or not initialised
EXIT_INCOMPLETE = 5  # with --exit-code: nothing found blocked, but a layer could not be judged
EXIT_INTERNAL = 70  # a bug (EX_SOFTWARE): rerun with --debug and report it
EXIT_INTERRUPTED = 130


def exit_status(error: BaseException) -> int:
    """The exit status for a user error."""
    if isinstance(error, (ReadFailedError, DeadlineExceededError)):
        return EXIT_CLUSTER
    if isinstance(error, StoreUnavailableError):
        return EXIT_STORE
    return EXIT_USAGE


def answer_status(answer: Answer) -> int:
    """The exit status `--exit-code` gives for an answer: blocked, unknown or clear."""
    if answer == Answer.BLOCKED:
        return EXIT_BLOCKED
    if answer == Answer.UNKNOWN:
        return EXIT_INCOMPLETE
    return EXIT_OK
