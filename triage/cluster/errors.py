"""The errors a cluster source raises: one family, each message one line for a user.

A read that fails is a `ReadFailedError` naming the read (verb, resource, namespace) and the
kind of fault, so a triage can say what it could not judge instead of judging on nothing.
"""

from __future__ import annotations


class SourceError(Exception):
    """Base of every error a cluster source raises. `str(e)` is a one-line user-facing message."""

    permanent: bool = True


class NotFoundError(SourceError):
    """The object (or namespace) does not exist."""


class ReadFailedError(SourceError):
    """One read could not be made. A triage that meets it says what it could not judge (the
    layers that needed the read become unknown) instead of judging on an empty list.

    `fault` names the kind of failure for people and scripts; `verb`, `resource` and
    `namespace` name the read (empty when the failure is not about one resource)."""

    fault = "unavailable"

    def __init__(
        self,
        message: str,
        *,
        verb: str = "",
        resource: str = "",
        namespace: str | None = None,
    ) -> None:
        self.verb, self.resource, self.namespace = verb, resource, namespace
        super().__init__(message)

    @property
    def grant(self) -> str | None:
        """The RBAC grant that would let the read through, for a refused read."""
        return None

    def about(self, message: str) -> ReadFailedError:
        """The same failure, told in another sentence."""
        other = ReadFailedError(
            message, verb=self.verb, resource=self.resource, namespace=self.namespace
        )
        other.fault = self.fault
        return other


class ForbiddenError(ReadFailedError):
    """The credentials may not read this. Carries what to grant."""

    fault = "forbidden"

    def __init__(self, *, verb: str, resource: str, namespace: str | None = None) -> None:
        where = f" in namespace {namespace}" if namespace else " at cluster scope"
        super().__init__(
            f"cannot {verb} {resource}{where}: grant {verb} on {resource}"
            + (f" in {namespace}" if namespace else ""),
            verb=verb,
            resource=resource,
            namespace=namespace,
        )

    @property
    def grant(self) -> str | None:
        return f"{self.verb} on {self.resource}" + (
            f" in {self.namespace}" if self.namespace else " at cluster scope"
        )


class UnauthorizedError(ReadFailedError):
    """401: the server rejected the credentials (expired token, wrong certificate)."""

    fault = "unauthorized"

    def __init__(
        self, server: str, *, verb: str = "", resource: str = "", namespace: str | None = None
    ) -> None:
        self.server = server
        super().__init__(
            f"the Kubernetes API at {server} rejected the credentials (401 Unauthorized)"
            + (f" to {verb} {resource}" if verb and resource else "")
            + ": refresh the kubeconfig token or certificate",
            verb=verb,
            resource=resource,
            namespace=namespace,
        )


class UnavailableError(ReadFailedError):
    """The cluster could not be reached, answered with a server error, or too slowly.
    Worth retrying."""

    permanent = False


class DeadlineExceededError(SourceError):
    """The command's overall deadline passed. Not a failed read of its own: every read after
    it would fail too, so the command ends here (no layer check catches it) instead of
    judging on what it could not read."""

    permanent = False


class NotServedError(ReadFailedError):
    """The source does not hold this kind: a snapshot taken without it, or with objects of an
    API version this engine does not read."""

    fault = "not-in-snapshot"


class MalformedSnapshotError(SourceError):
    """A snapshot file could not be read as Kubernetes objects."""
