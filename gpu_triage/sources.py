"""Chooses where cluster state comes from (a snapshot path, or the live cluster), and the flags
every command that reads a cluster shares."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from gpu_triage.output import add_output_arg
from gpu_triage.settings import DEFAULT_TIMEOUT, WIDE_TIMEOUT, CommonSettings, settings_of
from triage import ClusterSource, MemorySource, load_snapshot

if TYPE_CHECKING:
    from kube.client import RawClient


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


def add_cluster_args(p: argparse.ArgumentParser) -> None:
    """--snapshot / --kubeconfig / --context / --timeout / --chunk-size / -o / --playbook /
    --operator-namespace."""
    p.add_argument(
        "--snapshot",
        help="read cluster state from a snapshot: `gpu-triage snapshot` output (folder or "
        ".tar.gz) or `kubectl get … -o yaml|json` output (file or folder)",
    )
    add_live_args(p, wide_timeout=WIDE_TIMEOUT)
    add_output_arg(p)
    add_engine_args(p)


def add_live_args(
    p: argparse.ArgumentParser,
    *,
    timeout: float = DEFAULT_TIMEOUT,
    wide_timeout: float | None = None,
) -> None:
    """--kubeconfig / --context / --timeout (default: `timeout`, `wide_timeout` once the
    command lists every pod) / --chunk-size: how to read a live cluster."""
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
        f"$GPU_TRIAGE_TIMEOUT or {timeout:g}"
        + ("" if wide_timeout is None else f", {wide_timeout:g} once it lists every pod")
        + "); each request also ends after 30 s",
    )
    p.add_argument(
        "--chunk-size",
        type=_chunk,
        default=500,
        metavar="N",
        help="objects per page when listing a live cluster, as kubectl's --chunk-size "
        "(default 500)",
    )


def add_engine_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--playbook", help="playbook YAML ($GPU_TRIAGE_PLAYBOOK; default: bundled)")
    p.add_argument(
        "--operator-namespace",
        help="namespace of the GPU Operator ($GPU_TRIAGE_OPERATOR_NAMESPACE; default: found "
        "from the cluster: ClusterPolicy status, the DaemonSets it owns, its operands' labels)",
    )


def open_source(
    *,
    snapshot: str | None = None,
    kubeconfig: str | None = None,
    context: str | None = None,
    timeout: float | None = None,
    chunk_size: int = 500,
    read_ahead: str | None = None,
    wide_timeout: float | None = None,
) -> ClusterSource:
    """A snapshot when given; otherwise the kubeconfig context (or in-cluster config), read
    within `timeout` seconds in all (default: DEFAULT_TIMEOUT; `wide_timeout` once it lists
    every pod of the cluster, when given). `read_ahead` says what the command is ("triage",
    "sweep"): a live source then starts what such a command reads anyway at once, in
    parallel (`kube.live.connect`)."""
    if snapshot:  # kept as the cache keeps objects: a sixth of their memory, as well judged
        from kube.slim import projections

        return load_snapshot(snapshot, project=projections())
    from kube.live import connect  # imported lazily: the kubernetes client is slow to import

    return connect(
        kubeconfig=kubeconfig,
        context=context,
        timeout=timeout or DEFAULT_TIMEOUT,
        page_size=chunk_size,
        read_ahead=read_ahead,
        wide_timeout=wide_timeout,
    )


def source_from(
    args: argparse.Namespace,
    *,
    settings: CommonSettings | None = None,
    read_ahead: str | None = None,
) -> ClusterSource:
    """The source the command's cluster flags (`add_cluster_args`) name; a live one is read
    within `--timeout`, else `GPU_TRIAGE_TIMEOUT`, else the default: `DEFAULT_TIMEOUT`, and
    `WIDE_TIMEOUT` once it lists every pod of the cluster (`pending -A`, the usage of every
    node for a pod that fits anywhere)."""
    settings = settings or settings_of(args)
    given = "timeout" in settings.model_fields_set
    return open_source(
        snapshot=args.snapshot,
        kubeconfig=args.kubeconfig,
        context=args.context,
        timeout=settings.timeout,
        chunk_size=args.chunk_size,
        read_ahead=read_ahead,
        wide_timeout=None if given else WIDE_TIMEOUT,
    )


def live_client(source: ClusterSource) -> RawClient | None:
    """The live connection behind `source` (None for a snapshot)."""
    if isinstance(source, MemorySource):
        return None
    from kube.live import LiveSource  # imported lazily: see `open_source`

    return source.client if isinstance(source, LiveSource) else None
