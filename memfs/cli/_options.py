"""Every setting of the commands that mount, once: a flag, a `MEMFS_<FLAG>` variable and a config
file key, all read by one reader, the one place memfs.control's bounds are checked; it raises
ValueError with the end of a sentence (`is not a number of seconds`) that the caller begins. Each
argparse action keeps its `Option` as `.memfs_option`, for docs/configuration.md."""

from __future__ import annotations

import argparse
import logging
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Generic, Literal, TypeVar

from .. import control
from .._logging import LOG_FORMATS, LOG_LEVELS, LogFormat, parse_format, parse_level
from ..api import Deletions, session_id_problem
from ..supervisor import (
    DEFAULT_SESSION_CHECK_INTERVAL,
    MIN_SESSION_CHECK_INTERVAL,
    store_arg_problem,
)

_TOKEN_PREFIXES = ("sk-", "memfs_sesstok_", "user:", "service_account:")
"""Values that start so are API keys, sessions tokens or serve's token entries."""
_API_ID = re.compile(r"(memstore|mem|memver|sesn|sesrsc|work|env|agent)_[A-Za-z0-9]{1,128}")
_PATH_STARTS = ("/", "./", "../", "~")
HIDDEN = "… (not shown in case it is a secret)"


def looks_like_token(value: str) -> bool:
    """Whether a value memfs could not use may be a secret, left out of its
    sentence: one that starts as a key or token does, or a long one without
    spaces mixing digits and cases; an id of the API or a path does not."""
    if not value.isprintable() or value.startswith(_TOKEN_PREFIXES):
        return True
    if _API_ID.match(value) or value.startswith(_PATH_STARTS):
        return False
    if len(value) < 16 or " " in value:
        return False
    return sum(any(map(kind, value)) for kind in (str.isdigit, str.islower, str.isupper)) >= 2


T = TypeVar("T")
E = TypeVar("E", bound=StrEnum)


@dataclass(frozen=True)
class Option(Generic[T]):
    """One setting: `--<name>`, `MEMFS_<NAME>`, and `<name>` in the config
    file, whose value is a `T`."""

    name: str
    help: str
    parse: Callable[[object], T]
    default: T
    metavar: str | None = None
    kind: Literal["value", "switch", "list", "path"] = "value"
    """A path in the config file is relative to the file's folder."""
    shown_default: str = ""
    """The default as the docs write it, when it is not simply `default`."""
    group: str | None = None
    """Options of one group come from one source together: the highest that sets any of them."""

    @property
    def flag(self) -> str:
        return f"--{self.name}"

    @property
    def dest(self) -> str:
        return self.name.replace("-", "_")

    @property
    def env(self) -> str:
        return f"MEMFS_{self.dest.upper()}"

    def default_text(self) -> str:
        if self.shown_default:
            return self.shown_default
        if self.kind == "switch":
            return "off"
        if self.default is None or self.default == ():
            return "none"
        return f"{self.default:g}" if isinstance(self.default, float) else str(self.default)


def _text(raw: object) -> str:
    if not isinstance(raw, str):
        raise ValueError("is not a string")
    return raw.strip()


def _converted(raw: object, types: tuple[type, ...], convert: Callable[[Any], T], bad: str) -> T:
    """`raw` (text, or a TOML value of `types`) through `convert`; `bad` when it fails."""
    if isinstance(raw, bool) or not isinstance(raw, types):
        raise ValueError(bad)
    try:
        return convert(raw.strip() if isinstance(raw, str) else raw)
    except ValueError:
        raise ValueError(bad) from None


def path_value(raw: object) -> str:
    text = _text(raw)
    if not text:
        raise ValueError("is empty")
    return text


def seconds(*, minimum: float | None = None) -> Callable[[object], float]:
    """A number of seconds: at least `minimum`, or more than 0 without one."""

    def parse(raw: object) -> float:
        value = _converted(raw, (str, int, float), float, "is not a number of seconds")
        if not math.isfinite(value):
            raise ValueError("is not a number of seconds")
        if minimum is not None and value < minimum:
            raise ValueError(f"must be at least {minimum:g} seconds")
        if minimum is None and value <= 0:
            raise ValueError("must be more than 0 seconds")
        return value

    return parse


def whole(low: int, high: int) -> Callable[[object], int]:
    def parse(raw: object) -> int:
        value = _converted(raw, (str, int), int, "is not a whole number")
        if not low <= value <= high:
            raise ValueError(f"must be between {low} and {high}")
        return value

    return parse


_OWNER_ID = whole(0, 2**32 - 2)  # (uid_t)-1 means "unchanged" to chown
_SIZE_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}


def _bytes(given: str | int) -> int:
    text = str(given).upper()
    unit = text[-1:] if text[-1:] in _SIZE_UNITS else ""
    number = text[: len(text) - len(unit)]
    if not number.isdigit():
        raise ValueError(number)
    return int(number) * _SIZE_UNITS[unit]


def byte_size(raw: object) -> int:
    """A number of bytes, at least 1: a whole number, or one followed by K, M
    or G (powers of 1,024)."""
    bad = "is not a number of bytes (such as 268435456 or 256M)"
    value = _converted(raw, (str, int), _bytes, bad)
    if value < 1:
        raise ValueError("must be 1 byte or more")
    return value


def one_of(kind: type[E]) -> Callable[[object], E]:
    """One of an enum's words, exactly."""

    def parse(raw: object) -> E:
        text = _text(raw)
        try:
            return kind(text)
        except ValueError:
            raise ValueError(f"is not one of {', '.join(kind)}") from None

    return parse


def switch(raw: object) -> bool:
    """A TOML boolean, or 1/0, true/false, yes/no in any case."""
    if isinstance(raw, bool):
        return raw
    text = raw.strip().lower() if isinstance(raw, str) else None
    if text in ("1", "true", "yes"):
        return True
    if text in ("0", "false", "no"):
        return False
    raise ValueError("is not one of 1/0, true/false, yes/no")


def _checked(problem_of: Callable[[str], str | None]) -> Callable[[object], str]:
    """Text that `problem_of` finds no problem with (its problem ends the sentence)."""

    def parse(raw: object) -> str:
        text = _text(raw)
        problem = problem_of(text)
        if problem is not None:
            raise ValueError(problem)
        return text

    return parse


def store_specs(raw: object) -> tuple[str, ...]:
    """`--store` values: a TOML array of strings, or a variable's
    whitespace-separated list (one flag's value is one spec)."""
    if isinstance(raw, str):
        specs = raw.split()
    elif isinstance(raw, list) and all(isinstance(s, str) for s in raw):
        specs = [s.strip() for s in raw]
    else:
        raise ValueError("is not an array of strings")
    for spec in specs:
        problem = store_arg_problem(spec)
        if problem is not None:
            raise ValueError(f"has a store {spec!r} that {problem}")
    return tuple(specs)


def metrics_addr(raw: object) -> str:
    """`HOST:PORT`, an IPv6 host in brackets."""
    text = _text(raw)
    host, sep, port = text.rpartition(":")
    if not sep or not host.strip("[]") or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError("is not HOST:PORT (e.g. 127.0.0.1:9477)")
    return text


def _file(name: str, help: str, metavar: str = "FILE", **more: Any) -> Option[str | None]:
    """A setting that names a file or a folder: none by default."""
    return Option(name, help, path_value, None, metavar, kind="path", **more)


def _seconds(name: str, help: str, default: float, minimum: float | None = None) -> Option[float]:
    return Option(name, help, seconds(minimum=minimum), default, "SECONDS")


API_URL: Option[str | None] = Option(
    "api-url",
    "the Memory Store API's base URL; after this flag and MEMFS_API_URL come "
    "ANTHROPIC_BASE_URL, the config file's api-url, the secret's api_base_url",
    path_value,
    None,
    "URL",
    shown_default="https://api.anthropic.com",
)
TOKEN_FILE = _file(
    "token-file",
    "a file holding the token (or set MEMFS_TOKEN; ANTHROPIC_API_KEY or "
    "ANTHROPIC_AUTH_TOKEN count only when no work item secret is given); an "
    "sk-ant-api... key travels as x-api-key",
    group="credentials",
)
SECRET_FILE = _file(
    "secret-file",
    "a file holding the work item secret (or set MEMFS_WORK_ITEM_SECRET or "
    "ANTHROPIC_WORK_SECRET, or give --work-item); its sessions token is then the "
    "credential of every memory request",
    group="credentials",
)

MOUNT_OPTIONS: tuple[Option[Any], ...] = (
    Option(
        "store",
        "a store to mount (repeatable, at most 8); a variable holds specs separated "
        "by spaces, the config file an array",
        store_specs,
        (),
        "ID[:read_only|:read_write][=MOUNT_PATH]",
        kind="list",
        group="stores",
    ),
    _file("resources", "the session's resources array (JSON)", group="stores"),
    _file(
        "work-item",
        "a claimed work item's JSON as the worker's poll returns it (- for standard input): "
        "its session's memory stores are mounted, read with its secret's sessions token, "
        "and followed as stores are attached and detached",
        "FILE|-",
        group="stores",
    ),
    Option(
        "session",
        "a session whose memory stores to mount and follow, read with the work item secret "
        "(--secret-file...); ANTHROPIC_SESSION_ID counts when nothing else names the stores",
        _checked(session_id_problem),
        None,
        "ID",
        group="stores",
    ),
    Option(
        "root",
        "where stores without a mount path go",
        path_value,
        control.DEFAULT_ROOT,
        "DIR",
        kind="path",
    ),
    API_URL,
    TOKEN_FILE,
    SECRET_FILE,
    _file(
        "cache-dir",
        "the local cache (per store: the contents, plus 2 MiB kept for a full disk)",
        "DIR",
        shown_default="$XDG_CACHE_HOME/memfs or ~/.cache/memfs; /var/cache/memfs as root",
    ),
    Option("uid", "owner shown for files", _OWNER_ID, None, "UID", shown_default="the caller"),
    Option("gid", "group shown for files", _OWNER_ID, None, "GID", shown_default="the caller's"),
    Option("allow-other", "let other users reach the mounts", switch, False, kind="switch"),
    _seconds(
        "sync-interval",
        f"seconds between passes, at least {control.MIN_SYNC_INTERVAL:g}",
        control.DEFAULT_SYNC_INTERVAL,
        control.MIN_SYNC_INTERVAL,
    ),
    Option(
        "sync-deletions",
        "what a local delete does in the store",
        one_of(Deletions),
        Deletions.ENABLED,
        "|".join(Deletions),
    ),
    _seconds(
        "final-sync-timeout",
        "seconds for the final sync on stop",
        control.DEFAULT_FINAL_SYNC_TIMEOUT,
    ),
    Option(
        "sync-concurrency",
        f"requests at once in a sync pass, 1-{control.MAX_SYNC_CONCURRENCY}; the final sync uses "
        f"twice as many, at most {control.MAX_SYNC_CONCURRENCY}",
        whole(1, control.MAX_SYNC_CONCURRENCY),
        control.DEFAULT_SYNC_CONCURRENCY,
        "N",
    ),
    _seconds(
        "start-timeout",
        "seconds a mount's start waits in all for the API's first answer, in attempts of at "
        "most 5 s (a refused one ends at once), each one that gets no answer reported",
        control.DEFAULT_START_TIMEOUT,
    ),
    Option(
        "write-behind",
        "push local changes once the mount has been quiet for 2 s, at most once per "
        f"{control.MIN_SYNC_INTERVAL:g} s, without waiting for the next pass (no: at the passes only)",
        switch,
        True,
        "yes|no",
        shown_default="yes",
    ),
    _seconds(
        "session-check-interval",
        "seconds between two reads of a followed session (`--work-item`, `--session`), "
        f"at least {MIN_SESSION_CHECK_INTERVAL:g}",
        DEFAULT_SESSION_CHECK_INTERVAL,
        MIN_SESSION_CHECK_INTERVAL,
    ),
    Option(
        "cache-size",
        "bytes of clean contents each store's cache keeps on disk before the least recently "
        "used go (fetched again when read); K, M and G suffixes count in 1,024s",
        byte_size,
        control.DEFAULT_CACHE_SIZE,
        "BYTES",
        shown_default="256M",
    ),
    Option(
        "cache-memory",
        "bytes of the contents of the files closed last that each store keeps in memory, so "
        "that reading them again reads no cache file; K, M and G suffixes count in 1,024s",
        byte_size,
        control.DEFAULT_CACHE_MEMORY,
        "BYTES",
        shown_default="8M",
    ),
    Option(
        "metrics-addr",
        "serve Prometheus metrics of every mounted store at HOST:PORT (e.g. 127.0.0.1:9477)",
        metrics_addr,
        None,
        "HOST:PORT",
    ),
    Option("daemon", "return once every store is mounted", switch, False, kind="switch"),
)
"""Every setting of a mount, in the order `--help` lists them: one per field
of `MountSettings`, named as its dest."""

CONFIRM_TIMEOUT = _seconds(
    "confirm-timeout",
    "`memfs sync FILE...`: seconds to wait for the store to confirm the files",
    30.0,
)
"""Not a mount's setting: `memfs sync` reads it from its flag or its variable."""

LOG_LEVEL: Option[str | None] = Option(
    "log-level",
    "the least severe records logged, by memfs and the store processes it starts; "
    "-v is INFO, -vv DEBUG",
    lambda raw: str(logging.getLevelName(parse_level(_text(raw)))),
    None,
    "|".join(LOG_LEVELS),
    shown_default="WARNING; store processes INFO (under run WARNING)",
)
LOG_FORMAT: Option[LogFormat] = Option(
    "log-format",
    "text: readable lines; json: one JSON object per line",
    lambda raw: parse_format(_text(raw)),
    "text",
    "|".join(LOG_FORMATS),
)
LOG_OPTIONS: tuple[Option[Any], ...] = (LOG_LEVEL, LOG_FORMAT)
"""Settings every command takes (before or after its name)."""

CONFIG_OPTION = _file(
    "config",
    "the config file; a missing default file is no error, a missing named one is",
    shown_default="$XDG_CONFIG_HOME/memfs/config.toml or ~/.config/memfs/config.toml",
)

FILE_OPTIONS: dict[str, Option[Any]] = {o.name: o for o in (*MOUNT_OPTIONS, *LOG_OPTIONS)}
"""The config file's keys."""

SECRET_KEYS = ("token", "secret", "work-item-secret", "api-key")
"""Keys the config file refuses by name: a secret goes in a file of its own."""


def _flag_type(read: Callable[[object], T]) -> Callable[[str], T]:
    """An argparse type: the refusal names the value; argparse adds the flag."""

    def parse(text: str) -> T:
        try:
            return read(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(f"{text!r} {e}")

    return parse


def _one_store(raw: object) -> list[str]:
    """One `--store` flag's value: exactly one spec, spaces and all."""
    return [_checked(store_arg_problem)(raw)]


def add_option(p: argparse.ArgumentParser, option: Option[Any], default: Any = None) -> None:
    """`option` as a flag of `p`. Its argparse default is `default` (None:
    not given), so that a source further down may fill it in."""
    kwargs: dict[str, Any] = {"dest": option.dest, "default": default, "help": option.help}
    if option.kind == "switch":
        kwargs.update(action="store_const", const=True)
    else:
        shown = option.default_text()
        kwargs["help"] += f" (default: {shown})" if shown != "none" else ""
        kwargs["type"] = _flag_type(_one_store if option.kind == "list" else option.parse)
        kwargs["metavar"] = option.metavar
        if option.kind == "list":
            kwargs["action"] = "extend"
    p.add_argument(option.flag, **kwargs).memfs_option = option  # type: ignore[attr-defined]


def add_log_options(p: argparse.ArgumentParser, *, top: bool) -> None:
    """`--log-level` and `--log-format`, on `memfs` and on every command: one
    given after the command's name wins over one given before it."""
    for option in LOG_OPTIONS:
        add_option(p, option, None if top else argparse.SUPPRESS)


OTHER_VARIABLES: tuple[tuple[str, str, str], ...] = (
    (
        "MEMFS_SERVE_TOKEN",
        "serve",
        "the tokens `memfs serve` accepts, comma-separated (with those of `--token-file`)",
    ),
    (
        "MEMFS_TOKEN_FILE",
        "store",
        "`memfs store`'s `--token-file` (for the commands that mount it is a setting above)",
    ),
    ("MEMFS_AUTH", "store", "`memfs store`'s `--auth`: `bearer` or `x-api-key`"),
    (
        "MEMFS_CONFIRM_TIMEOUT",
        "sync",
        "`memfs sync FILE...`'s `--confirm-timeout`: seconds to wait for the store to "
        "confirm the files (default 30)",
    ),
    (
        "MEMFS_RUNTIME_DIR",
        "all",
        "where state files and control sockets live (default `/run/memfs` as root, else "
        "`$XDG_RUNTIME_DIR/memfs`, else `/tmp/memfs-<uid>`)",
    ),
    (
        "ANTHROPIC_SESSION_ID",
        "mount",
        "the session whose stores to mount (as `--session`), when no flag, variable or "
        "config file names stores, a work item or a session; `ant beta:worker poll --on-work` "
        "sets it",
    ),
    ("XDG_CONFIG_HOME", "mount", "the folder of the default config file (`~/.config`)"),
    ("XDG_CACHE_HOME", "mount", "the folder of the default cache (`~/.cache`)"),
)
"""Variables that are not a flag's: (name, used by, meaning). The credential
variables are `memfs.supervisor`'s (`ENV_SOURCES`, `URL_ENV`)."""


class SecretOnCommandLine(argparse.Action):
    """A flag that would put a secret on the command line, where `ps` shows
    it: refused, without echoing its value; `const` says what to give instead."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs="?", help=argparse.SUPPRESS, **kwargs)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        parser.error(
            f"{option_string} is not taken: a secret on the command line shows in ps; {self.const}"
        )
