"""One line on a terminal's stderr while a command reads a large cluster: how many objects
its lists have received so far, rewritten in place and erased when the command is done.

`pending -A` on 20,000 nodes reads about 1.2 million objects and takes a minute; without a
word it looks hung. Nothing is written when stderr is not a terminal (a pipe, a CI log, a
test) or when the source is not a live cluster, and nothing for a command done within a second.
"""

from __future__ import annotations

import logging
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from typing import TextIO

from gpu_triage.sources import live_client
from triage import ClusterSource

Counts = Callable[[], Mapping[str, int]]


def listed_by(source: ClusterSource) -> Counts | None:
    """What a live source's lists have received so far (`RawClient.listed`), else None (a
    snapshot)."""
    client = live_client(source)
    return None if client is None else client.listed


def line(counts: Mapping[str, int], seconds: float, width: int) -> str:
    """`read 1,170,412 objects (pods 600,003, jobs 565,416, nodes 20,000, …) in 41 s`, cut to
    `width` (a line that wraps could not be rewritten in place)."""
    total = sum(counts.values())
    top = sorted(((n, kind) for kind, n in counts.items() if n), reverse=True)
    kinds = ", ".join(f"{kind} {n:,}" for n, kind in top[:3]) + (", …" if len(top) > 3 else "")
    text = f"read {total:,} objects" + (f" ({kinds})" if kinds else "") + f" in {seconds:.0f} s"
    return text[: max(width, 1)]


@contextmanager
def showing_reads(
    counts: Counts | None,
    stream: TextIO | None = None,
    *,
    after: float = 1.0,
    every: float = 0.5,
) -> Iterator[None]:
    """While the block runs, the reads so far on `stream` (stderr), from `after` seconds on,
    every `every` seconds, when `stream` is a terminal and `counts` is given."""
    out = stream if stream is not None else sys.stderr
    if counts is None or not _is_terminal(out):
        yield
        return
    stop = threading.Event()
    started = time.monotonic()
    painting = threading.Lock()
    shown = 0  # the length of the line on screen

    def show() -> None:
        nonlocal shown
        if stop.wait(after):
            return
        while True:
            width = shutil.get_terminal_size((80, 24)).columns - 1
            text = line(counts(), time.monotonic() - started, width)
            with painting, suppress(OSError, ValueError):  # the terminal went away: no line
                out.write("\r" + text.ljust(shown))
                out.flush()
                shown = len(text)
            if stop.wait(every):
                return

    def erase() -> None:
        nonlocal shown
        with painting, suppress(OSError, ValueError):
            if shown:
                shown, width = 0, shown
                out.write("\r" + " " * width + "\r")  # what follows starts a clean line
                out.flush()

    # A warning logged meanwhile (a retried request) gets a line of its own: the line is
    # erased before it, and painted again after.
    clear = _Clearing(erase)
    handlers = [h for h in logging.getLogger().handlers if getattr(h, "stream", None) is out]
    for handler in handlers:
        handler.addFilter(clear)
    painter = threading.Thread(target=show, name="progress", daemon=True)
    painter.start()
    try:
        yield
    finally:
        stop.set()
        painter.join()
        for handler in handlers:
            handler.removeFilter(clear)
        erase()


class _Clearing(logging.Filter):
    def __init__(self, erase: Callable[[], None]) -> None:
        super().__init__()
        self._erase = erase

    def filter(self, record: logging.LogRecord) -> bool:
        self._erase()
        return True


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no such method, or a closed stream
        return False
