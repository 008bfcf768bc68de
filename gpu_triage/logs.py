"""Logs a cluster's pipeline can read: timestamped, levelled, JSON when asked, and quiet.

`LOG_LEVEL` (debug, info, warning, error; default info for the bot, warning for the CLI,
whose answers and errors are its output) and `LOG_FORMAT` (`text`, the default, or `json`:
one object a line with `time`, `level`, `logger`, `message`, and `error` for a traceback)
apply to every command. What a platform team does not want in its log store:

- libraries talking at start (Alembic's "Context impl SQLiteImpl", waitress's "Serving on",
  the kubernetes client's retries): their loggers are held at warning unless LOG_LEVEL is
  debug;
- the same warning every scrape or reconnect while one thing is wrong, the same "alert held
  back: quiet hours" every sweep: a line (info and above) whose text was logged in the last
  `REPEAT_WINDOW` is dropped, and the next one after the window says how many were ("(and
  118 more like it in the last 10m)"). One fact, one line; debug lines are never dropped.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime

from gpu_triage.errors import UserError

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
          "error": logging.ERROR}  # fmt: skip
# Loggers of libraries that speak at INFO about their own business.
LIBRARIES = ("alembic", "waitress", "kubernetes", "urllib3", "slack_bolt", "slack_sdk",
             "asyncio", "sqlalchemy", "httpx", "langchain", "langchain_core")  # fmt: skip
REPEAT_WINDOW = 600.0  # seconds


def _iso(created: float) -> str:
    stamp = datetime.fromtimestamp(created, UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond // 1000:03d}Z"


class TextFormatter(logging.Formatter):
    """`2026-12-05T14:03:11.123Z WARNING gpu_triage.metrics: message`."""

    def format(self, record: logging.LogRecord) -> str:
        line = f"{_iso(record.created)} {record.levelname} {record.name}: {record.getMessage()}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


class JsonFormatter(logging.Formatter):
    """One JSON object a line: time, level, logger, message (and error: the traceback)."""

    def format(self, record: logging.LogRecord) -> str:
        data = {
            "time": _iso(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            data["error"] = self.formatException(record.exc_info)
        return json.dumps(data, ensure_ascii=False)


class OncePerFact(logging.Filter):
    """Drops a line (info and above) whose text was logged within `window` seconds; the next
    one after the window carries the count of those dropped."""

    def __init__(
        self, *, window: float = REPEAT_WINDOW, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__()
        self.window = window
        self._clock = clock
        self._seen: dict[tuple[str, str], tuple[float, int]] = {}  # -> (last said, dropped)
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.INFO:
            return True
        fact = (record.name, record.getMessage())
        now = self._clock()
        with self._lock:
            said, dropped = self._seen.get(fact, (None, 0))
            if said is not None and now - said < self.window:
                self._seen[fact] = (said, dropped + 1)
                return False
            self._seen[fact] = (now, 0)
            if len(self._seen) > 10_000:  # facts of long ago
                self._seen = {k: v for k, v in self._seen.items() if now - v[0] < self.window}
        if dropped:
            minutes = round(self.window / 60)
            record.msg = (
                f"{record.getMessage()} (and {dropped} more like it in the last {minutes}m)"
            )
            record.args = None
        return True


def configure(
    *, command: str | None, debug: bool = False, quiet: logging.Filter | None = None
) -> None:
    """Set up the root logger for this process from LOG_LEVEL and LOG_FORMAT (a bad value is
    a one-line UserError naming the variable). `quiet` filters what the handler writes."""
    default = "info" if command == "bot" else "warning"
    raw_level = (os.environ.get("LOG_LEVEL") or default).strip().lower()
    if debug:
        raw_level = "debug"
    if raw_level not in LEVELS:
        raise UserError(f"LOG_LEVEL must be one of {', '.join(LEVELS)}, not {raw_level!r}")
    raw_format = (os.environ.get("LOG_FORMAT") or "text").strip().lower()
    if raw_format not in ("text", "json"):
        raise UserError(f"LOG_FORMAT must be text or json, not {raw_format!r}")
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if raw_format == "json" else TextFormatter())
    handler.addFilter(OncePerFact())
    if quiet is not None and not debug:
        handler.addFilter(quiet)
    root = logging.getLogger()
    for old in list(root.handlers):  # ours from an earlier call (tests call main() often)
        if getattr(old, "gpu_triage", False):
            root.removeHandler(old)
    handler.gpu_triage = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    level = LEVELS[raw_level]
    root.setLevel(level)
    for name in LIBRARIES:
        logging.getLogger(name).setLevel(level if level == logging.DEBUG else logging.WARNING)
