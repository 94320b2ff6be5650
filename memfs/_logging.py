"""What memfs writes on stderr: its log, as readable lines or as JSON, and
the progress line of a long download or final sync on a terminal.

Two formats, the same in `memfs` and in the store processes it starts (the
supervisor passes the choice on in `MEMFS_LOG_FORMAT` and `MEMFS_LOG_LEVEL`),
and so in the daemon logs `<cache-dir>/<store id>/memfs.log`:

- `text` (the default): `2025-01-02 03:04:05,678 memfs.sync WARNING <message>`,
  local time, the format memfs has always had.
- `json`: one object per line, `time` (RFC 3339, UTC, milliseconds), `level`,
  `logger`, `message`, and where they apply `store_id` (every record of a
  store process), `path` (the store path a record is about), `event` (a
  stable name, listed with every warning and error in
  docs/troubleshooting.md) and `exception` (a traceback's text).

Log calls name what they concern with `extra={"event": ..., "path": ...}`.
No secret is ever a record's argument: tokens stay in `StoreSpec` and the
client's headers.

The progress line (`Progress`) is written only when stderr is a terminal and
the format is `text`: never into a file, a pipe or a JSON log. A log record
written while it shows clears it first and draws it again after.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from datetime import UTC, datetime
from typing import IO, Any, Literal, get_args

LogFormat = Literal["text", "json"]
LOG_FORMATS: tuple[LogFormat, ...] = get_args(LogFormat)
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
TEXT_FORMAT = "%(asctime)s %(name)s %(levelname)s %(message)s"
RECORD_FIELDS = ("store_id", "path", "event")
"""The fields a JSON record carries beyond time, level, logger and message, when set."""

_lock = threading.RLock()
_state: dict[str, Any] = {"format": "text", "progress": None}


def parse_level(text: str) -> int:
    """A level name (any case) -> its number; ValueError naming the choices."""
    name = text.strip().upper()
    if name not in LOG_LEVELS:
        raise ValueError(f"is not one of {', '.join(LOG_LEVELS)}")
    return int(logging.getLevelName(name))


def parse_format(text: str) -> LogFormat:
    """A format's name (any case); ValueError naming the choices."""
    name = text.strip().lower()
    for log_format in LOG_FORMATS:
        if name == log_format:
            return log_format
    raise ValueError(f"is not one of {', '.join(LOG_FORMATS)}")


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line."""

    def format(self, record: logging.LogRecord) -> str:
        when = datetime.fromtimestamp(record.created, UTC)
        out: dict[str, Any] = {
            "time": when.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key in RECORD_FIELDS:
            value = getattr(record, key, None)
            if value is not None:
                out[key] = str(value)
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        if record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return json.dumps(out, ensure_ascii=False)


class StoreIdFilter(logging.Filter):
    """Stamps a store process's store id on every record it writes."""

    def __init__(self, store_id: str) -> None:
        super().__init__()
        self.store_id = store_id

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "store_id", None) is None:
            record.store_id = self.store_id
        return True


class _Handler(logging.StreamHandler[IO[str]]):
    """A stream handler that steps around the progress line."""

    def emit(self, record: logging.LogRecord) -> None:
        with _lock:
            progress: Progress | None = _state["progress"]
            if progress is not None:
                progress.clear()
            super().emit(record)
            if progress is not None:
                progress.draw()


def setup_logging(
    level: int | str, log_format: LogFormat = "text", *, store_id: str | None = None
) -> None:
    """Send every record at `level` and above to stderr in `log_format`,
    replacing any handler set before (the root logger's)."""
    if log_format not in LOG_FORMATS:
        raise ValueError(f"unknown log format {log_format!r}")
    handler = _Handler(sys.stderr)
    handler.setFormatter(
        JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT)
    )
    if store_id is not None:
        handler.addFilter(StoreIdFilter(store_id))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    _state["format"] = log_format


class Progress:
    """`<what>: N/M files` on one terminal line, rewritten with `\\r` at most
    ten times a second, ended with a newline by `finish()`.

    `Progress.start(...)` returns None where progress must not show: stderr
    is not a terminal (a pipe, a daemon's log file) or the log is JSON."""

    INTERVAL = 0.1

    def __init__(self, what: str, total: int, stream: IO[str]) -> None:
        self.what = what
        self.total = total
        self.done = 0
        self.stream = stream
        self._drawn_at = 0.0
        self._shown = False

    @classmethod
    def start(cls, what: str, total: int, stream: IO[str] | None = None) -> Progress | None:
        stream = sys.stderr if stream is None else stream
        if _state["format"] != "text" or not _isatty(stream):
            return None
        progress = cls(what, total, stream)
        with _lock:
            _state["progress"] = progress
            progress.draw()
        return progress

    def update(self, done: int, total: int | None = None) -> None:
        if done == self.done and total in (None, self.total):
            return
        self.done = done
        if total is not None:
            self.total = total
        now = time.monotonic()
        if now - self._drawn_at >= self.INTERVAL:
            with _lock:
                self.draw()

    def finish(self) -> None:
        with _lock:
            if _state["progress"] is self:
                _state["progress"] = None
            self._write(f"\r{self._text()}\n")

    def _text(self) -> str:
        return f"{self.what}: {min(self.done, self.total)}/{self.total} files"

    def draw(self) -> None:
        self._drawn_at = time.monotonic()
        self._shown = True
        self._write(f"\r{self._text()}\x1b[K")

    def clear(self) -> None:
        if self._shown:
            self._write("\r\x1b[K")

    def _write(self, text: str) -> None:
        try:
            self.stream.write(text)
            self.stream.flush()
        except (OSError, ValueError):
            pass


def _isatty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (OSError, ValueError):
        return False


class ProgressReport:
    """A progress callback, `(done, total)`, that shows a `Progress` line
    only once there is enough to show: more than `minimum_total` files, and
    `after` seconds since it was made. `finish()` ends the line, if one was
    drawn."""

    def __init__(self, what: str, *, minimum_total: int = 0, after: float = 0.0) -> None:
        self.what = what
        self.minimum_total = minimum_total
        self.not_before = time.monotonic() + after
        self.line: Progress | None = None
        self._refused = False

    def __call__(self, done: int, total: int) -> None:
        if self.line is None:
            if self._refused or total <= self.minimum_total or time.monotonic() < self.not_before:
                return
            self.line = Progress.start(self.what, total)
            if self.line is None:  # not a terminal, or a JSON log: never
                self._refused = True
                return
        self.line.update(done, total)

    def finish(self) -> None:
        if self.line is not None:
            self.line.finish()
            self.line = None
