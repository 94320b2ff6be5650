"""What memfs writes on stderr: its log, as readable lines or as JSON (the
formats docs/troubleshooting.md shows, the same in every process), and the
progress line of a long download or final sync on a terminal, which a log
record clears and draws again. Log calls name what they concern with
`extra={"event": ..., "path": ...}`; no secret is ever a record's argument.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
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
    if name not in LOG_FORMATS:
        raise ValueError(f"is not one of {', '.join(LOG_FORMATS)}")
    return name


class JsonFormatter(logging.Formatter):
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


class _Handler(logging.StreamHandler[IO[str]]):
    def emit(self, record: logging.LogRecord) -> None:
        with _lock:
            progress: ProgressReport | None = _state["progress"]
            if progress is not None:
                progress.clear()
            super().emit(record)
            if progress is not None:
                progress.draw()


def setup_logging(
    level: int | str, log_format: LogFormat = "text", *, store_id: str | None = None
) -> None:
    """Send every record at `level` and above to stderr in `log_format`,
    replacing the root logger's handlers."""
    handler = _Handler(sys.stderr)
    handler.setFormatter(
        JsonFormatter() if log_format == "json" else logging.Formatter(TEXT_FORMAT)
    )
    if store_id is not None:

        def stamp(record: logging.LogRecord) -> bool:
            if getattr(record, "store_id", None) is None:
                record.store_id = store_id
            return True

        handler.addFilter(stamp)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    _state["format"] = log_format


def setup_logging_from_env(
    default_level: str, *, store_id: str | None = None
) -> tuple[str, LogFormat]:
    """`setup_logging` at the level and in the format a parent memfs passed on
    (`MEMFS_LOG_LEVEL`, `MEMFS_LOG_FORMAT`), else at `default_level` and in
    text; httpx's own records from WARNING only. Both, to pass on in turn."""
    try:
        level = parse_level(os.environ.get("MEMFS_LOG_LEVEL", default_level))
    except ValueError:
        level = parse_level(default_level)
    try:
        log_format = parse_format(os.environ.get("MEMFS_LOG_FORMAT", "text"))
    except ValueError:
        log_format = "text"
    setup_logging(level, log_format, store_id=store_id)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    return logging.getLevelName(level), log_format


class ProgressReport:
    """A progress callback, `(done, total)`, that draws `<what>: N/M files` on
    one terminal line, rewritten with `\\r` at most ten times a second, once
    there are more than `minimum_total` files and `after` seconds have
    passed; never where stderr is not a terminal or the log is JSON.
    `finish()` ends the line, if one was drawn."""

    INTERVAL = 0.1

    def __init__(self, what: str, *, minimum_total: int = 0, after: float = 0.0) -> None:
        self.what = what
        self.minimum_total = minimum_total
        self.not_before = time.monotonic() + after
        self.done = self.total = 0
        self.stream = sys.stderr
        self.showing = False
        self._refused = False
        self._drawn_at = 0.0

    def __call__(self, done: int, total: int) -> None:
        if not self.showing:
            if self._refused or total <= self.minimum_total or time.monotonic() < self.not_before:
                return
            self.stream = sys.stderr
            try:
                terminal = self.stream.isatty()
            except (OSError, ValueError):
                terminal = False
            if _state["format"] != "text" or not terminal:
                self._refused = True
                return
            self.showing = True
            self.total = total
            with _lock:
                _state["progress"] = self
                self.draw()
        if done == self.done and total == self.total:
            return
        self.done, self.total = done, total
        if time.monotonic() - self._drawn_at >= self.INTERVAL:
            with _lock:
                self.draw()

    def finish(self) -> None:
        if not self.showing:
            return
        self.showing = False
        with _lock:
            if _state["progress"] is self:
                _state["progress"] = None
            self._write(f"\r{self._text()}\n")

    def _text(self) -> str:
        return f"{self.what}: {min(self.done, self.total)}/{self.total} files"

    def draw(self) -> None:
        self._drawn_at = time.monotonic()
        self._write(f"\r{self._text()}\x1b[K")

    def clear(self) -> None:
        self._write("\r\x1b[K")

    def _write(self, text: str) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.stream.write(text)
            self.stream.flush()
