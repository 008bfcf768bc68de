"""Errors the live adapter adds to the engine's `SourceError` family, each one line."""

from __future__ import annotations

from triage.cluster.source import (
    ReadFailedError,
    SourceError,
    UnauthorizedError,
    UnavailableError,
)

__all__ = [
    "ConfigError",
    "CredentialsError",
    "NotKubernetesError",
    "TLSError",
    "UnauthorizedError",
]


class ConfigError(SourceError):
    """No usable kubeconfig, an unknown context, or in-cluster config that cannot load."""


class CredentialsError(ReadFailedError):
    """The kubeconfig's credentials could not be obtained: an exec plugin or auth provider
    failed, or a token or certificate file cannot be read."""

    fault = "credentials"


class TLSError(UnavailableError):
    """The TLS handshake with the API server failed: an unknown CA, a wrong host name, an
    expired certificate."""

    fault = "tls"
    permanent = True


class NotKubernetesError(UnavailableError):
    """What answered is not a Kubernetes API server (a proxy, a web server, a wrong port)."""

    fault = "not-kubernetes"
    permanent = True
