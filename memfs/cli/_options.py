"""The settings of `memfs mount` (and of every command that mounts, such as
`memfs run`), defined once: each is a flag, a `MEMFS_<FLAG>` variable and a
key of the config file, with one function that reads its value from any of
them.

`MOUNT_OPTIONS` is the table, one `Option[T]` per field of
`memfs.supervisor.MountSettings` (the value's type `T`); `add_options` puts it
on a parser (each argparse action keeps its `Option` as `.memfs_option`,
which is how `scripts/gen_config_doc.py` writes docs/configuration.md from
the parser); `memfs.cli._config` decides which source wins and makes the
settings.

A value's reader (`Option.parse`) takes the text of a flag or a variable, or
the value a TOML file holds, and returns the value or raises ValueError with
the end of a sentence (`is not a number of seconds`) that the caller begins
by naming the source. The bounds it checks are memfs.control's, and this is
the one place they are checked.
"""

from __future__ import annotations

import argparse
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Generic, Literal, TypeVar

from .. import control
from .._exceptions import ConfigError
from .._logging import LOG_FORMATS, LOG_LEVELS, LogFormat, parse_format, parse_level
from ..api import Deletions, session_id_problem
from ..supervisor import (
    DEFAULT_SESSION_CHECK_INTERVAL,
    MIN_SESSION_CHECK_INTERVAL,
    parse_metrics_addr,
    store_arg_problem,
)

Kind = Literal["value", "switch", "list", "path"]

TRUE_WORDS = ("1", "true", "yes")
FALSE_WORDS = ("0", "false", "no")

T = TypeVar("T")
E = TypeVar("E", bound=StrEnum)


@dataclass(frozen=True)
class Option(Generic[T]):
    """One setting: `--<name>`, `MEMFS_<NAME>`, and `<name>` in the config
    file, whose value is a `T`."""

    name: str
    """The flag without its dashes: `sync-interval`; also the config file's key."""
    help: str
    parse: Callable[[object], T]
    """The value of a flag's or a variable's text, or of a TOML value."""
    default: T
    kind: Kind = "value"
    metavar: str | None = None
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

    @property
    def key(self) -> str:
        return self.name

    def default_text(self) -> str:
        if self.shown_default:
            return self.shown_default
        if self.kind == "switch":
            return "off"
        if self.default is None or self.default == ():
            return "none"
        return f"{self.default:g}" if isinstance(self.default, float) else str(self.default)


# ---------------------------------------------------------------- readers


def _text(raw: object) -> str:
    if not isinstance(raw, str):
        raise ValueError("is not a string")
    return raw.strip()


def path_value(raw: object) -> str:
    text = _text(raw)
    if not text:
        raise ValueError("is empty")
    return text


def seconds(*, minimum: float | None = None) -> Callable[[object], float]:
    """A number of seconds: at least `minimum`, or more than 0 without one."""

    def parse(raw: object) -> float:
        if isinstance(raw, bool) or not isinstance(raw, str | int | float):
            raise ValueError("is not a number of seconds")
        try:
            value = float(raw.strip() if isinstance(raw, str) else raw)
        except ValueError:
            raise ValueError("is not a number of seconds")
        if not math.isfinite(value):
            raise ValueError("is not a number of seconds")
        if minimum is not None and value < minimum:
            raise ValueError(f"must be at least {minimum:g} seconds")
        if minimum is None and value <= 0:
            raise ValueError("must be more than 0 seconds")
        return value

    return parse


def whole(low: int, high: int | None = None) -> Callable[[object], int]:
    """A whole number from `low` (to `high`)."""

    def parse(raw: object) -> int:
        if isinstance(raw, bool) or not isinstance(raw, str | int):
            raise ValueError("is not a whole number")
        try:
            value = int(raw.strip() if isinstance(raw, str) else raw)
        except ValueError:
            raise ValueError("is not a whole number")
        if high is not None and not low <= value <= high:
            raise ValueError(f"must be between {low} and {high}")
        if value < low:
            raise ValueError(f"must be {low} or more")
        return value

    return parse


_SIZE_UNITS = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}


def byte_size(raw: object) -> int:
    """A number of bytes, at least 1: a whole number, or one followed by K, M or G
    (powers of 1,024)."""
    if isinstance(raw, bool) or not isinstance(raw, str | int):
        raise ValueError("is not a number of bytes (such as 268435456 or 256M)")
    text = raw.strip().upper() if isinstance(raw, str) else str(raw)
    unit = text[-1:] if text[-1:] in ("K", "M", "G") else ""
    number = text[: len(text) - len(unit)]
    if not number.isdigit():
        raise ValueError("is not a number of bytes (such as 268435456 or 256M)")
    value = int(number) * _SIZE_UNITS[unit]
    if value < 1:
        raise ValueError("must be 1 byte or more")
    return value


def one_of(kind: type[E]) -> Callable[[object], E]:
    """One of an enum's words, exactly."""

    def parse(raw: object) -> E:
        text = _text(raw)
        for member in kind:
            if text == member.value:
                return member
        raise ValueError(f"is not one of {', '.join(kind)}")

    return parse


def switch(raw: object) -> bool:
    """A TOML boolean, or 1/0, true/false, yes/no in any case."""
    if isinstance(raw, bool):
        return raw
    text = raw.strip().lower() if isinstance(raw, str) else None
    if text in TRUE_WORDS:
        return True
    if text in FALSE_WORDS:
        return False
    raise ValueError("is not one of 1/0, true/false, yes/no")


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


def store_spec(raw: object) -> list[str]:
    """One `--store` flag: exactly one spec, spaces and all (argparse extends
    the flags' list with it)."""
    text = _text(raw)
    problem = store_arg_problem(text)
    if problem is not None:
        raise ValueError(problem)
    return [text]


def file_option(
    name: str,
    help: str,
    *,
    metavar: str = "FILE",
    group: str | None = None,
    shown_default: str = "",
) -> Option[str | None]:
    """A setting that names a file or a folder: none by default, and in the
    config file relative to the file's folder."""
    return Option(
        name,
        help,
        path_value,
        default=None,
        kind="path",
        metavar=metavar,
        group=group,
        shown_default=shown_default,
    )


def id_option(name: str, help: str, *, shown_default: str) -> Option[int | None]:
    """A user or group id files show (`--uid`, `--gid`): none by default."""
    return Option(
        name, help, whole(0), default=None, metavar=name.upper(), shown_default=shown_default
    )


def session_id(raw: object) -> str:
    text = _text(raw)
    problem = session_id_problem(text)
    if problem is not None:
        raise ValueError(problem)
    return text


def metrics_addr(raw: object) -> str:
    text = _text(raw)
    try:
        parse_metrics_addr(text)
    except ConfigError:
        raise ValueError("is not HOST:PORT (e.g. 127.0.0.1:9477)") from None
    return text


def _level(raw: object) -> str:
    return str(logging.getLevelName(parse_level(_text(raw))))


def _format(raw: object) -> LogFormat:
    return parse_format(_text(raw))


# ---------------------------------------------------------------- the table

STORE: Option[tuple[str, ...]] = Option(
    "store",
    "a store to mount (repeatable, at most 8); a variable holds specs separated "
    "by spaces, the config file an array",
    store_specs,
    default=(),
    kind="list",
    metavar="ID[:read_only|:read_write][=MOUNT_PATH]",
    group="stores",
)
RESOURCES = file_option(
    "resources",
    "the session's resources array (JSON)",
    group="stores",
)
WORK_ITEM = file_option(
    "work-item",
    "a claimed work item's JSON as the worker's poll returns it (- for standard input): "
    "its session's memory stores are mounted, read with its secret's sessions token, "
    "and followed as stores are attached and detached",
    metavar="FILE|-",
    group="stores",
)
SESSION: Option[str | None] = Option(
    "session",
    "a session whose memory stores to mount and follow, read with the work item secret "
    "(--secret-file...); ANTHROPIC_SESSION_ID counts when nothing else names the stores",
    session_id,
    default=None,
    metavar="ID",
    group="stores",
)
ROOT: Option[str] = Option(
    "root",
    "where stores without a mount path go",
    path_value,
    default=control.DEFAULT_ROOT,
    kind="path",
    metavar="DIR",
)
API_URL: Option[str | None] = Option(
    "api-url",
    "the Memory Store API's base URL; after this flag and MEMFS_API_URL come "
    "ANTHROPIC_BASE_URL, the config file's api-url, the secret's api_base_url",
    path_value,
    default=None,
    metavar="URL",
    shown_default="https://api.anthropic.com",
)
TOKEN_FILE = file_option(
    "token-file",
    "a file holding the token (or set MEMFS_TOKEN; ANTHROPIC_API_KEY or "
    "ANTHROPIC_AUTH_TOKEN count only when no work item secret is given); an "
    "sk-ant-api... key travels as x-api-key",
    group="credentials",
)
SECRET_FILE = file_option(
    "secret-file",
    "a file holding the work item secret (or set MEMFS_WORK_ITEM_SECRET or "
    "ANTHROPIC_WORK_SECRET, or give --work-item); its sessions token is then the "
    "credential of every memory request",
    group="credentials",
)
CACHE_DIR = file_option(
    "cache-dir",
    "the local cache (per store: the contents, plus 2 MiB kept for a full disk)",
    metavar="DIR",
    shown_default="$XDG_CACHE_HOME/memfs or ~/.cache/memfs; /var/cache/memfs as root",
)
UID = id_option("uid", "owner shown for files", shown_default="the caller")
GID = id_option("gid", "group shown for files", shown_default="the caller's")
ALLOW_OTHER: Option[bool] = Option(
    "allow-other", "let other users reach the mounts", switch, default=False, kind="switch"
)
SYNC_INTERVAL: Option[float] = Option(
    "sync-interval",
    f"seconds between passes, at least {control.MIN_SYNC_INTERVAL:g}",
    seconds(minimum=control.MIN_SYNC_INTERVAL),
    default=control.DEFAULT_SYNC_INTERVAL,
    metavar="SECONDS",
)
SYNC_DELETIONS: Option[Deletions] = Option(
    "sync-deletions",
    "what a local delete does in the store",
    one_of(Deletions),
    default=Deletions.ENABLED,
    metavar="|".join(Deletions),
)
FINAL_SYNC_TIMEOUT: Option[float] = Option(
    "final-sync-timeout",
    "seconds for the final sync on stop",
    seconds(),
    default=control.DEFAULT_FINAL_SYNC_TIMEOUT,
    metavar="SECONDS",
)
SYNC_CONCURRENCY: Option[int] = Option(
    "sync-concurrency",
    f"requests at once in a sync pass, 1-{control.MAX_SYNC_CONCURRENCY}; the final sync uses "
    f"twice as many, at most {control.MAX_SYNC_CONCURRENCY}",
    whole(1, control.MAX_SYNC_CONCURRENCY),
    default=control.DEFAULT_SYNC_CONCURRENCY,
    metavar="N",
)
START_TIMEOUT: Option[float] = Option(
    "start-timeout",
    "seconds a mount's start waits in all for the API's first answer, in attempts of a "
    "few seconds, each one that gets no answer reported",
    seconds(),
    default=control.DEFAULT_START_TIMEOUT,
    metavar="SECONDS",
)
WRITE_BEHIND: Option[bool] = Option(
    "write-behind",
    "push local changes once the mount has been quiet for 2 s, at most once per "
    f"{control.MIN_SYNC_INTERVAL:g} s, without waiting for the next pass (no: at the passes only)",
    switch,
    default=True,
    metavar="yes|no",
    shown_default="yes",
)
SESSION_CHECK_INTERVAL: Option[float] = Option(
    "session-check-interval",
    "seconds between two reads of a followed session (`--work-item`, `--session`), "
    f"at least {MIN_SESSION_CHECK_INTERVAL:g}",
    seconds(minimum=MIN_SESSION_CHECK_INTERVAL),
    default=DEFAULT_SESSION_CHECK_INTERVAL,
    metavar="SECONDS",
)
CACHE_SIZE: Option[int] = Option(
    "cache-size",
    "bytes of clean contents each store's cache keeps on disk before the least recently "
    "used go (fetched again when read); K, M and G suffixes count in 1,024s",
    byte_size,
    default=control.DEFAULT_CACHE_SIZE,
    metavar="BYTES",
    shown_default="256M",
)
METRICS_ADDR: Option[str | None] = Option(
    "metrics-addr",
    "serve Prometheus metrics of every mounted store at HOST:PORT (e.g. 127.0.0.1:9477)",
    metrics_addr,
    default=None,
    metavar="HOST:PORT",
)
DAEMON: Option[bool] = Option(
    "daemon", "return once every store is mounted", switch, default=False, kind="switch"
)

MOUNT_OPTIONS: tuple[Option[Any], ...] = (
    STORE,
    RESOURCES,
    WORK_ITEM,
    SESSION,
    ROOT,
    API_URL,
    TOKEN_FILE,
    SECRET_FILE,
    CACHE_DIR,
    UID,
    GID,
    ALLOW_OTHER,
    SYNC_INTERVAL,
    SYNC_DELETIONS,
    FINAL_SYNC_TIMEOUT,
    SYNC_CONCURRENCY,
    START_TIMEOUT,
    WRITE_BEHIND,
    SESSION_CHECK_INTERVAL,
    CACHE_SIZE,
    METRICS_ADDR,
    DAEMON,
)
"""Every setting of a mount, in the order `--help` and the docs list them:
one per field of `MountSettings`."""

CONFIRM_TIMEOUT: Option[float] = Option(
    "confirm-timeout",
    "`memfs sync FILE...`: seconds to wait for the store to confirm the files",
    seconds(),
    default=30.0,
    metavar="SECONDS",
)
"""Not a mount's setting: `memfs sync` reads it from its flag or its variable."""

LOG_LEVEL: Option[str | None] = Option(
    "log-level",
    "the least severe records logged, by memfs and the store processes it starts; "
    "-v is INFO, -vv DEBUG",
    _level,
    default=None,
    metavar="|".join(LOG_LEVELS),
    shown_default="WARNING; store processes INFO",
)
LOG_FORMAT: Option[LogFormat] = Option(
    "log-format",
    "text: readable lines; json: one JSON object per line",
    _format,
    default="text",
    metavar="|".join(LOG_FORMATS),
)
LOG_OPTIONS: tuple[Option[Any], ...] = (LOG_LEVEL, LOG_FORMAT)
"""Settings every command takes (before or after its name); the config file
sets them for the commands that mount."""

CONFIG_OPTION = file_option(
    "config",
    "the config file; a missing default file is no error, a missing named one is",
    shown_default="$XDG_CONFIG_HOME/memfs/config.toml or ~/.config/memfs/config.toml",
)

FILE_OPTIONS: dict[str, Option[Any]] = {o.key: o for o in (*MOUNT_OPTIONS, *LOG_OPTIONS)}
"""The config file's keys."""

SECRET_KEYS = ("token", "secret", "work-item-secret", "api-key")
"""Keys the config file refuses by name: a secret goes in a file of its own."""


# ---------------------------------------------------------------- the parser


def _flag_type(read: Callable[[object], T]) -> Callable[[str], T]:
    """An argparse type: the refusal names the value; argparse adds the flag."""

    def parse(text: str) -> T:
        try:
            return read(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(f"{text!r} {e}")

    return parse


def add_option(
    p: argparse.ArgumentParser,
    option: Option[Any],
    *,
    default: Any = None,
    extra_flags: Sequence[str] = (),
) -> argparse.Action:
    """`option` as a flag of `p`. Its argparse default is `default` (None:
    not given), so that a source further down may fill it in."""
    shown = f" (default: {option.default_text()})" if option.default_text() != "none" else ""
    common: dict[str, Any] = {"dest": option.dest, "default": default}
    if option.kind == "switch":
        action = p.add_argument(
            *extra_flags, option.flag, action="store_const", const=True, help=option.help, **common
        )
    elif option.kind == "list":
        action = p.add_argument(
            *extra_flags,
            option.flag,
            action="extend",
            type=_flag_type(store_spec),
            metavar=option.metavar,
            help=option.help + shown,
            **common,
        )
    else:
        action = p.add_argument(
            *extra_flags,
            option.flag,
            type=_flag_type(option.parse),
            metavar=option.metavar,
            help=option.help + shown,
            **common,
        )
    action.memfs_option = option  # type: ignore[attr-defined]
    return action


def add_options(p: argparse.ArgumentParser) -> None:
    """The mount settings and `--config` on `p`: `memfs mount`, `memfs run`."""
    for option in MOUNT_OPTIONS:
        add_option(p, option)
    add_option(p, CONFIG_OPTION)
    p.set_defaults(_settings=MOUNT_OPTIONS)


def add_log_options(p: argparse.ArgumentParser, *, top: bool) -> None:
    """`--log-level` and `--log-format`, on `memfs` itself and on every
    command: a command's own (given after its name) leaves the one given
    before it alone unless given too."""
    for option in LOG_OPTIONS:
        add_option(p, option, default=None if top else argparse.SUPPRESS)


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
variables are `memfs.supervisor`'s (`SECRET_ENV`, `URL_ENV`)."""


class SecretOnCommandLine(argparse.Action):
    """A flag that would put a secret on the command line, where `ps` shows it
    to every user: refused, without echoing its value. `const` says what to
    give instead."""

    def __init__(
        self, option_strings: Sequence[str], dest: str, const: str = "", **kwargs: Any
    ) -> None:
        super().__init__(option_strings, dest, nargs="?", help=argparse.SUPPRESS, **kwargs)
        self.instead = const

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        parser.error(
            f"{option_string} is not taken: a secret on the command line shows in ps; "
            f"{self.instead}"
        )
