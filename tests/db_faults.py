"""Databases made to fail the ways they fail in production, for the store and bot tests.

- `sqlite_locked`: another process holds SQLite's write lock (`BEGIN IMMEDIATE`) until told.
- `read_only`: a file or directory the bot may not write: `chattr +i` as root (root ignores
  permission bits), `chmod` otherwise.
- `pg_tables_locked`: another PostgreSQL session holds ACCESS EXCLUSIVE locks on tables.
- `FrozenProxy`: a TCP proxy in its own process in front of PostgreSQL, stopped with SIGSTOP:
  the server stays up but nothing comes back, as when a network path or a pooler freezes.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

_HOLD_LOCK = """
import sqlite3, sys
db = sqlite3.connect(sys.argv[1], isolation_level=None)
db.execute("BEGIN IMMEDIATE")
print("locked", flush=True)
sys.stdin.read()
db.execute("COMMIT")
"""


@contextmanager
def sqlite_locked(path: Path) -> Iterator[None]:
    """Another process holds the write lock of the SQLite file at `path` inside the block."""
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_LOCK, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        yield
    finally:
        assert holder.stdin is not None and holder.stdout is not None
        holder.stdin.close()
        holder.wait(timeout=10)
        holder.stdout.close()


def _chattr(path: Path, flag: str) -> bool:
    chattr = shutil.which("chattr")
    if chattr is None:
        return False
    done = subprocess.run([chattr, flag, str(path)], capture_output=True, check=False)
    return done.returncode == 0


@contextmanager
def read_only(path: Path) -> Iterator[None]:
    """`path` (a file or a directory) cannot be written by this process inside the block."""
    if os.geteuid() == 0:
        if not _chattr(path, "+i"):
            pytest.skip("running as root without chattr +i: cannot make a file read-only")
        try:
            yield
        finally:
            _chattr(path, "-i")
        return
    mode = path.stat().st_mode
    path.chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))
    try:
        yield
    finally:
        path.chmod(mode)


@contextmanager
def pg_tables_locked(url: str, tables: list[str]) -> Iterator[None]:
    """Another session holds ACCESS EXCLUSIVE locks on `tables` inside the block."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            conn.execute(text(f"LOCK TABLE {', '.join(tables)} IN ACCESS EXCLUSIVE MODE"))
            try:
                yield
            finally:
                conn.rollback()
    finally:
        engine.dispose()


_PROXY = """
import socket, sys, threading
target = (sys.argv[1], int(sys.argv[2]))
server = socket.create_server(("127.0.0.1", 0))
print(server.getsockname()[1], flush=True)
def pipe(a, b):
    try:
        while data := a.recv(65536):
            b.sendall(data)
    except OSError:
        pass
    finally:
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
while True:
    client, _ = server.accept()
    upstream = socket.create_connection(target)
    for a, b in ((client, upstream), (upstream, client)):
        threading.Thread(target=pipe, args=(a, b), daemon=True).start()
"""


class FrozenProxy:
    """A TCP proxy to `host:port` in a child process; `freeze()` stops it with SIGSTOP."""

    def __init__(self, host: str, port: int) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _PROXY, host, str(port)], stdout=subprocess.PIPE, text=True
        )
        assert self.proc.stdout is not None
        self.port = int(self.proc.stdout.readline())

    def freeze(self) -> None:
        """Stops the proxy, and returns once it is stopped: a signal takes effect when the
        process next runs, and a query sent meanwhile (on a loaded machine) would pass."""
        self.proc.send_signal(signal.SIGSTOP)
        proc_stat = Path(f"/proc/{self.proc.pid}/stat")
        deadline = time.monotonic() + 5
        while proc_stat.exists() and time.monotonic() < deadline:
            if proc_stat.read_text().rpartition(")")[2].split()[0] in ("T", "t"):
                return
            time.sleep(0.002)

    def thaw(self) -> None:
        self.proc.send_signal(signal.SIGCONT)

    def close(self) -> None:
        self.thaw()
        self.proc.kill()
        self.proc.wait(timeout=10)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
