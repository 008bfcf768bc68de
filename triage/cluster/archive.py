"""Snapshots in a `.tar.gz` (what `gpu-triage snapshot --output x.tar.gz` writes), read as
they are: a stream, never unpacked to disk.

An archive is input from anywhere, like a snapshot file, and can hold more than files: links
and devices (refused), names reaching outside it (refused, though nothing is written: a name
is how errors point at a member), a gzip bomb or a pax header of a gigabyte (the decompressed
stream itself is bounded, before tarfile reads any header), millions of empty entries (at most
MAX_MEMBERS). Members that are not snapshot files (the logs beside them) are skipped as the
stream moves on; they count against the same bound.
"""

from __future__ import annotations

import gzip
import os
import stat
import tarfile
import zlib
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import IO, Protocol

from triage.cluster.bounded import first_line
from triage.cluster.errors import MalformedSnapshotError

ARCHIVES = (".tar.gz", ".tgz")
SUFFIXES = (".yaml", ".yml", ".json")
MAX_MEMBERS = 100_000  # entries of an archive, read or skipped (its logs, folders)


class _Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


class _Bounded:
    """A decompressed stream that refuses to give more than `limit` bytes in all: what an
    archive can cost is bounded before tarfile reads a header (a gzip bomb, a pax header of a
    gigabyte), not only its members' declared sizes."""

    def __init__(self, raw: _Readable, left: int, *, root: Path, limit: str) -> None:
        self.raw, self.left, self.root, self.limit = raw, left, root, limit

    def read(self, size: int = -1) -> bytes:
        want = self.left + 1 if size < 0 else min(size, self.left + 1)
        data = self.raw.read(want)
        self.left -= len(data)
        if self.left < 0:
            raise MalformedSnapshotError(
                f"{self.root}: the archive unpacks to more than {self.limit}"
            )
        return data


def read_archive(root: Path, budget: int, *, limit: str) -> Iterator[tuple[Path, bytes]]:
    """The snapshot files in a .tar.gz, read as a stream: regular members only, names inside
    the archive, at most MAX_MEMBERS entries and twice `budget` bytes decompressed."""
    raw = read_handle(root)
    found = 0
    try:
        with raw, gzip.GzipFile(fileobj=raw) as unzipped:
            stream = _Bounded(unzipped, 2 * budget, root=root, limit=limit)
            with tarfile.open(fileobj=stream, mode="r|") as tar:  # type: ignore[call-overload]
                for n, member in enumerate(tar, 1):
                    if n > MAX_MEMBERS:
                        raise MalformedSnapshotError(f"{root}: more than {MAX_MEMBERS:,} entries")
                    name = _member_name(root, member)
                    if member.isdir() or not name.endswith(SUFFIXES):
                        continue  # logs and folders: skipped as the stream moves on
                    if member.size > budget:
                        raise MalformedSnapshotError(f"{root}: {name}: larger than {limit}")
                    extracted = tar.extractfile(member)
                    data = extracted.read() if extracted is not None else b""
                    budget -= len(data)
                    found += 1
                    yield Path(f"{root}:{name}"), data
    except (tarfile.TarError, zlib.error, EOFError, gzip.BadGzipFile) as e:
        raise MalformedSnapshotError(f"{root}: not a readable .tar.gz: {first_line(e)}") from e
    if not found:
        raise MalformedSnapshotError(f"{root}: archive holds no .yaml, .yml or .json files")


def _member_name(root: Path, member: tarfile.TarInfo) -> str:
    name = member.name
    if not (member.isreg() or member.isdir()):
        what = "a link" if member.issym() or member.islnk() else "a device or FIFO"
        raise MalformedSnapshotError(f"{root}: {name}: not a regular file ({what})")
    parts = PurePosixPath(name).parts
    if name.startswith("/") or ".." in parts:
        raise MalformedSnapshotError(f"{root}: {name}: a path outside the archive")
    return name


def read_handle(path: Path) -> IO[bytes]:
    """The file open for reading, if it is a regular file (checked on the descriptor)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as e:
        raise MalformedSnapshotError(f"{path}: cannot read: {e.strerror or e}") from e
    f = os.fdopen(fd, "rb")
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        f.close()
        what = "a FIFO" if stat.S_ISFIFO(mode) else "a device or socket"
        raise MalformedSnapshotError(f"{path}: not a regular file ({what})")
    return f
