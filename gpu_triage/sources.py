"""Chooses where cluster state comes from: a snapshot path, or the live cluster."""

from __future__ import annotations

import argparse
import os

from gpu_triage.errors import UserError
from gpu_triage.output import add_output_arg
from triage import ClusterSource, load_snapshot

DEFAULT_TIMEOUT = 120.0  # seconds a command may spend reading a live cluster


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value <= 86400:
        raise argparse.ArgumentTypeError("must be between 0 and 86400 seconds")
    return value


def _chunk(text: str) -> int:
    if not text.isascii() or not text.isdigit() or not 1 <= int(text) <= 10_000:
        raise argparse.ArgumentTypeError("must be a whole number from 1 to 10000")
    return int(text)


def env_timeout() -> float:
    """GPU_TRIAGE_TIMEOUT, or the default; a bad value is a one-line error."""
    raw = os.environ.get("GPU_TRIAGE_TIMEOUT")
    if not raw:
        return DEFAULT_TIMEOUT
    try:
        return _seconds(raw)
    except argparse.ArgumentTypeError as e:
        raise UserError(f"GPU_TRIAGE_TIMEOUT {e}") from None


def add_cluster_args(p: argparse.ArgumentParser) -> None:
    """--snapshot / --kubeconfig / --context / --timeout / --chunk-size / -o / --playbook /
    --operator-namespace."""
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
    p.add_argument(
        "--timeout",
        type=_seconds,
        default=None,
        metavar="SECONDS",
        help="give up reading a live cluster after this long in all (default: "
        f"$GPU_TRIAGE_TIMEOUT or {DEFAULT_TIMEOUT:g}); each request also ends after 30 s",
    )
    p.add_argument(
        "--chunk-size",
        type=_chunk,
        default=500,
        metavar="N",
        help="objects per page when listing a live cluster, as kubectl's --chunk-size "
        "(default 500)",
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
    *,
    snapshot: str | None = None,
    kubeconfig: str | None = None,
    context: str | None = None,
    timeout: float | None = None,
    chunk_size: int = 500,
    read_ahead: str | None = None,
) -> ClusterSource:
    """A snapshot when given; otherwise the kubeconfig context (or in-cluster config), read
    within `timeout` seconds in all (default: GPU_TRIAGE_TIMEOUT, else DEFAULT_TIMEOUT).
    `read_ahead` says what the command is ("triage", "sweep"): a live source then starts
    what such a command reads anyway at once, in parallel (`kube.live.connect`)."""
    if snapshot:
        return load_snapshot(snapshot)
    from kube.live import connect  # imported lazily: the kubernetes client is slow to import

    return connect(
        kubeconfig=kubeconfig,
        context=context,
        timeout=timeout or env_timeout(),
        page_size=chunk_size,
        read_ahead=read_ahead,
    )


def source_from(args: argparse.Namespace, *, read_ahead: str | None = None) -> ClusterSource:
    """The source the command's cluster flags (`add_cluster_args`) name."""
    return open_source(
        snapshot=args.snapshot,
        kubeconfig=args.kubeconfig,
        context=args.context,
        timeout=args.timeout,
        chunk_size=args.chunk_size,
        read_ahead=read_ahead,
    )
