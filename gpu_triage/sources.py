"""Chooses where cluster state comes from: a snapshot path, or the live cluster."""

from __future__ import annotations

import argparse
import os

from gpu_triage.output import add_output_arg
from triage import ClusterSource, load_snapshot


def add_cluster_args(p: argparse.ArgumentParser) -> None:
    """--snapshot / --kubeconfig / --context / -o / --playbook / --operator-namespace."""
    p.add_argument(
        "--snapshot",
        help="read cluster state from `kubectl get … -o yaml|json` output (file or folder)",
    )
    p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
    p.add_argument(
        "--context",
        "--cluster",
        dest="context",
        help="kubeconfig context, the cluster's name in the bot (default: current context)",
    )
    add_output_arg(p)
    add_engine_args(p)


def add_engine_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--playbook",
        default=os.environ.get("GPU_TRIAGE_PLAYBOOK"),
        help="playbook YAML (default: bundled)",
    )
    p.add_argument(
        "--operator-namespace",
        default=os.environ.get("GPU_TRIAGE_OPERATOR_NAMESPACE") or None,
        help="namespace of the GPU Operator (default: found from the cluster: ClusterPolicy "
        "status, the DaemonSets it owns, its operands' labels)",
    )


def open_source(
    *, snapshot: str | None = None, kubeconfig: str | None = None, context: str | None = None
) -> ClusterSource:
    """A snapshot when given; otherwise the kubeconfig context (or in-cluster config)."""
    if snapshot:
        return load_snapshot(snapshot)
    from kube.live import connect  # imported lazily: the kubernetes client is slow to import

    return connect(kubeconfig=kubeconfig, context=context)
