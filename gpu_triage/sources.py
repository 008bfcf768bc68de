"""Chooses where cluster state comes from: a snapshot path, or the live cluster."""

from __future__ import annotations

from triage import ClusterSource, load_snapshot


def open_source(
    *, snapshot: str | None = None, kubeconfig: str | None = None, context: str | None = None
) -> ClusterSource:
    """A snapshot when given; otherwise the kubeconfig context (or in-cluster config)."""
    if snapshot:
        return load_snapshot(snapshot)
    from kube.live import connect  # imported lazily: the kubernetes client is slow to import

    return connect(kubeconfig=kubeconfig, context=context)
