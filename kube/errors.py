"""Errors the live adapter adds to the engine's `SourceError` family, each one line."""

from __future__ import annotations

from triage.cluster.source import SourceError


class ConfigError(SourceError):
    """No usable kubeconfig, an unknown context, or in-cluster config that cannot load."""


class UnauthorizedError(SourceError):
    """401: the server rejected the credentials (expired token, wrong certificate)."""

    def __init__(self, server: str) -> None:
        self.server = server
        super().__init__(
            f"the Kubernetes API at {server} rejected the credentials (401 Unauthorized): "
            "refresh the kubeconfig token or certificate"
        )
