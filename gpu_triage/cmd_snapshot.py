"""`gpu-triage snapshot`: a cluster's state as the engine reads it, for later or elsewhere.

A snapshot is how a triage leaves the cluster: attached to a ticket, read by a vendor, run
again after a fix. It holds exactly the kinds the engine reads (`kube.collect`), redacted
(`kube.redact`), with a manifest saying what was collected and what could not be, and
optionally the logs of the GPU components' failing containers. It is written as a folder or
a `.tar.gz`, and `--snapshot` reads either as it is.
"""

from __future__ import annotations

import argparse
import errno
import os
import tarfile
import tempfile
import time
import zlib
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, cast

import yaml

from gpu_triage.errors import EXIT_OK, UserError
from gpu_triage.progress import showing_reads
from gpu_triage.settings import settings_of
from gpu_triage.sources import add_live_args
from triage.cluster.archive import ARCHIVES
from triage.cluster.coverage import MANIFEST_FILE, plural
from triage.cluster.kinds import ALL_KINDS
from triage.cluster.objects import Obj, container_states
from triage.cluster.snapshot import SUFFIXES, VALUES_PER_MB, max_mb, values_in
from triage.names import validate_namespace

if TYPE_CHECKING:
    from kube.client import RawClient
    from kube.collect import Collected, Log, Part, Spool


def register(sub: Any) -> None:
    p = sub.add_parser(
        "snapshot",
        help="save the cluster's state as the engine reads it (a folder or .tar.gz)",
        description="Collect every kind the engine reads, redacted (Secret data, environment "
        "values, tokens), with a manifest of what was collected; --snapshot reads the result.",
    )
    p.add_argument(
        "path", nargs="?", metavar="PATH",
        help="where to write: a new or empty folder, or a file ending in .tar.gz (default: "
        "gpu-triage-snapshot-<cluster>-<UTC time>.tar.gz here)",
    )  # fmt: skip
    scope = p.add_mutually_exclusive_group()
    scope.add_argument(
        "-n", "--namespace", action="append",
        help="collect workloads, quotas and queues of this namespace (repeatable; default: the "
        "kubeconfig context's); the pods on every node, DaemonSets, Deployments, claims and "
        "the cluster-scoped kinds are collected everywhere, as the engine reads them",
    )  # fmt: skip
    scope.add_argument(
        "-A", "--all-namespaces", action="store_true", help="collect every namespace"
    )
    p.add_argument(
        "--logs", action="store_true",
        help=f"add the current and previous logs (last {LOG_LINES} lines) of the GPU "
        "components' failing containers",
    )  # fmt: skip
    add_live_args(p, timeout=SNAPSHOT_TIMEOUT)
    p.set_defaults(handler=snapshot)


LOG_LINES = 500
# A snapshot reads every object of the cluster: about 3.5 minutes at 20,000 nodes and 600,000
# pods on the bench, where the other commands' 120 s default would end it.
SNAPSHOT_TIMEOUT = 1800.0


def snapshot(args: argparse.Namespace) -> int:
    from kube.collect import collect
    from kube.live import connect

    for ns in args.namespace or []:
        validate_namespace(ns)
    settings = settings_of(args)
    timeout = settings.timeout if "timeout" in settings.model_fields_set else SNAPSHOT_TIMEOUT
    source = connect(kubeconfig=args.kubeconfig, context=args.context, timeout=timeout,
                     page_size=args.chunk_size)  # fmt: skip
    namespaces = None
    if not args.all_namespaces:
        namespaces = args.namespace or [source.default_namespace or "default"]
    dest = Path(args.path) if args.path else _default_path(source.client.cluster_name)
    started = time.monotonic()
    got = None
    try:
        spool_in = _writable_folder(dest)  # before minutes of reading, not after
        with showing_reads(source.client.listed):
            got = collect(source.client, namespaces=namespaces, tool=_tool(),
                          page_size=args.chunk_size, seen=_noted, spool_in=spool_in,
                          gzip=dest.name.endswith(ARCHIVES))  # fmt: skip
            _check_namespaces(got, namespaces)
            if args.logs:
                got.logs = _logs(source.client, got)
        content = files(got)
        write(content, dest)
    except OSError as e:
        if e.errno not in _DISK_ERRORS:
            raise
        raise UserError(f"cannot write {dest}: {os.strerror(e.errno or 0)}") from e
    finally:
        source.close()
        if got is not None:
            got.close()
    print(_summary(got, content, dest, seconds=time.monotonic() - started))
    return EXIT_OK


# What a full or read-only disk answers: the snapshot cannot be written, say so in a line.
_DISK_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG, errno.EACCES, errno.EIO}


def _writable_folder(dest: Path) -> Path:
    """The folder the snapshot is written in (and its objects kept in meanwhile: on disk, as
    they arrive), once it is known `dest` can be written."""
    if not dest.name.endswith(ARCHIVES) and dest.exists():
        if not dest.is_dir() or any(dest.iterdir()):
            raise UserError(f"{dest}: exists and is not an empty folder (or name a .tar.gz)")
    elif dest.is_dir():
        raise UserError(f"{dest}: is a folder (name a new .tar.gz, or a folder without .tar.gz)")
    folder = dest.absolute().parent
    if dest.name.endswith(ARCHIVES) and not folder.is_dir():
        raise UserError(f"{dest}: folder {folder} does not exist")
    while not folder.exists():  # a folder written is made with its parents
        folder = folder.parent
    if not os.access(folder, os.W_OK | os.X_OK):
        raise UserError(f"cannot write {dest}: {os.strerror(errno.EACCES)} ({folder})")
    return folder


def _tool() -> str:
    try:
        return f"gpu-triage {version('gpu-triage')}"
    except PackageNotFoundError:
        return "gpu-triage"


def _noted(kind: str, obj: Obj) -> object:
    """What the command needs of an object collected (`collect` keeps its JSON only): a
    namespace's name, the logs to take of a pod (None: nothing)."""
    if kind == "Namespace":
        return str((obj.get("metadata") or {}).get("name"))
    if kind == "Pod":
        return _wanted_logs(obj) or None
    return None


def _check_namespaces(got: Collected, namespaces: list[str] | None) -> None:
    record = got.manifest.kinds.get("Namespace")
    if namespaces is None or record is None or not record.collected:
        return
    known = {name for kind, name in got.noted if kind == "Namespace"}
    for ns in namespaces:
        if ns not in known:
            raise UserError(f"namespace {ns} not found in cluster {got.manifest.cluster}")


def failing_containers(pod: Obj) -> list[tuple[str, bool]]:
    """(container, whether it ran before) of each container of `pod` that fails: waiting for
    another reason than starting, exited non-zero, or restarting and not ready."""
    found = []
    for name, cs in container_states(pod):
        state = cs.get("state") or {}
        waiting = (state.get("waiting") or {}).get("reason")
        exited = (state.get("terminated") or {}).get("exitCode", 0)
        restarts = int(cs.get("restartCount") or 0)
        starting = waiting in ("PodInitializing", "ContainerCreating")
        if (waiting and not starting) or exited or (restarts and not cs.get("ready")):
            found.append((name, restarts > 0))
    return found


def _wanted_logs(pod: Obj) -> list[Log]:
    """The logs to take of `pod`: of its failing containers when it is a GPU component's
    (driver, toolkit, device plugin, validator...), current and previous."""
    from kube.collect import Log
    from triage.layers.stacks.components import pod_component

    if pod_component(pod) is None:
        return []
    meta = pod.get("metadata") or {}
    ns, name = str(meta.get("namespace")), str(meta.get("name"))
    wanted = []
    for container, ran_before in failing_containers(pod):
        wanted.append(Log(ns, name, container, previous=False))
        if ran_before:
            wanted.append(Log(ns, name, container, previous=True))
    return wanted


def _logs(client: RawClient, got: Collected) -> list[Log]:
    """Logs of the failing containers of GPU component pods (`_wanted_logs`), at most
    MAX_LOGS."""
    from kube.collect import MAX_LOGS, container_log

    wanted = [log for kind, logs in got.noted if kind == "Pod" for log in cast("list[Log]", logs)]
    return [container_log(client, log, got.redactions) for log in wanted[:MAX_LOGS]]


def _default_path(cluster: str) -> Path:
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in cluster)[:60]
    return Path(f"gpu-triage-snapshot-{safe}-{stamp}.tar.gz")


class File(NamedTuple):
    """One file of a snapshot: `head`, a `part` of what `spool` holds (objects of a kind),
    `tail`."""

    name: str
    head: bytes
    spool: Spool | None = None
    part: Part | None = None
    tail: bytes = b""

    @property
    def size(self) -> int:
        return len(self.head) + (self.part.size if self.part else 0) + len(self.tail)


def files(got: Collected) -> list[File]:
    """The snapshot's files: the manifest, one JSON List per kind collected with objects
    (`kube.collect`: its items are on disk; a large kind's in several), and the logs."""
    from kube.collect import LIST_HEAD, LIST_TAIL

    manifest = got.manifest
    manifest.extra = {"redacted": got.redactions.as_dict()}
    if got.logs:
        manifest.extra["logs"] = [
            {"pod": f"{log.namespace}/{log.pod}", "container": log.container,
             "previous": log.previous, **({"file": log.path} if log.text else {}),
             **({"error": log.error} if log.error else {})}
            for log in got.logs
        ]  # fmt: skip
    out = [File(MANIFEST_FILE, yaml.safe_dump(manifest.to_object(), sort_keys=False).encode())]
    for kind, spool in sorted(got.objects.items()):
        rt = ALL_KINDS[kind]
        name = f"objects/{rt.plural}{'.' + rt.group if rt.group else ''}"
        for i, part in enumerate(spool.parts):  # pods.json, pods.2.json, ...
            out.append(File(f"{name}{f'.{i + 1}' if i else ''}.json", LIST_HEAD, spool, part,
                            LIST_TAIL))  # fmt: skip
    out += [File(log.path, log.text) for log in got.logs if log.text]
    return out


def write(content: list[File], dest: Path) -> None:
    """The snapshot's `content` (`files`) at `dest`, whole or not at all: a .tar.gz, or a
    new (or empty) folder, readable by its owner only (redacted, it still describes the
    cluster)."""
    if dest.name.endswith(ARCHIVES):
        _write_archive(content, dest)
        return
    _writable_folder(dest)
    dest.mkdir(mode=0o700, parents=True, exist_ok=True)
    for f in content:
        target = dest / f.name
        target.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(f.head)
            if f.spool is not None and f.part is not None:
                f.spool.copy_to(out, f.part)
            out.write(f.tail)


def _write_archive(content: list[File], dest: Path) -> None:
    """`content` as a .tar.gz at `dest` (replaced whole): one gzip stream joined from pieces
    (`kube.gzjoin`): each file's header and head, its spool's pieces as they are (compressed
    as its objects arrived), its tail and padding; the archive's end. What `tarfile` would
    have written, compressed once."""
    from kube import gzjoin

    top = dest.name.removesuffix(".tgz").removesuffix(".tar.gz")
    mtime = int(time.time())
    fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", dir=dest.absolute().parent)
    try:
        with os.fdopen(fd, "wb") as out:
            crc = length = 0  # of the tar stream

            def put(data: bytes) -> None:
                nonlocal crc, length
                out.write(gzjoin.piece(data))
                crc, length = zlib.crc32(data, crc), length + len(data)

            out.write(gzjoin.header(mtime))
            for f in content:
                info = tarfile.TarInfo(f"{top}/{f.name}")
                info.size, info.mode, info.mtime = f.size, 0o600, mtime
                header, padding = info.tobuf(), bytes(-f.size % tarfile.BLOCKSIZE)
                if f.spool is None or f.part is None:
                    put(header + f.head + f.tail + padding)
                    continue
                assert f.spool.gzip, "a spool joins an archive compressed"
                put(header + f.head)
                f.spool.copy_to(out, f.part)
                crc = gzjoin.crc32_combine(crc, f.part.crc, f.part.size)
                length += f.part.size
                put(f.tail + padding)
            end = 2 * tarfile.BLOCKSIZE  # two empty blocks, then up to a whole record
            put(bytes(end + -(length + end) % tarfile.RECORDSIZE))
            out.write(gzjoin.trailer(crc, length))
        os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _summary(got: Collected, content: list[File], dest: Path, *, seconds: float) -> str:
    """What was written, what is missing, what was redacted, and how to use it."""
    kinds = got.manifest.kinds
    total = sum(r.objects for r in kinds.values() if r.collected)
    scope = (
        "all namespaces" if got.manifest.namespaces is None
        else "namespace(s) " + ", ".join(got.manifest.namespaces)
    )  # fmt: skip
    lines = [
        f"wrote {dest}: {total:,} objects of {sum(r.collected for r in kinds.values())} kinds "
        f"from cluster {got.manifest.cluster} ({scope}) in {seconds:.1f}s"
    ]
    missing = {k: r.reason for k, r in kinds.items() if not r.collected}
    for kind, why in sorted(missing.items()):
        lines.append(f"not collected: {plural(kind)} ({why}): reports from it say so")
    r = got.redactions
    lines.append(
        f"redacted: {r.env_values} environment value(s), {r.tokens} token(s), "
        f"{r.annotations} last-applied annotation(s)"
    )
    if got.logs:
        written = sum(1 for log in got.logs if log.text)
        lines.append(f"logs: {written} of {len(got.logs)} failing GPU component container log(s)")
    bound, unpacked = read_bound(content)
    command = f"gpu-triage why-pending POD -n NAMESPACE --snapshot {dest}"
    if bound > max_mb():
        lines.append(
            f"reading it takes GPU_TRIAGE_SNAPSHOT_MAX_MB={bound} ({unpacked / 1e6:,.0f} MB "
            f"unpacked; the bound is {max_mb()} MiB)"
        )
        command = f"GPU_TRIAGE_SNAPSHOT_MAX_MB={bound} {command}"
    lines.append(f"triage from it: {command}")
    return "\n".join(lines)


def read_bound(content: list[File]) -> tuple[int, int]:
    """The least GPU_TRIAGE_SNAPSHOT_MAX_MB that reads the snapshot of `content` (`files`),
    counted as the reader counts (`triage.cluster.snapshot`: its files' bytes, their values,
    and twice the bound for the archive's stream, logs and headers included), and its bytes
    unpacked."""
    read = [f for f in content if f.name.endswith(SUFFIXES)]
    size = sum(f.size for f in read)
    values = sum(values_in(Path(f.name), f.head + f.tail) + (f.part.values if f.part else 0)
                 for f in read)  # fmt: skip
    stream = sum(f.size + 2 * tarfile.BLOCKSIZE for f in content)
    mib = 1 << 20
    need = max(-(-size // mib), -(-values // VALUES_PER_MB), -(-stream // (2 * mib)), 1)
    return need, sum(f.size for f in content)
