"""The settings of `memfs mount` (and of every command that mounts, such as
`memfs run`), defined once: each is a flag, a `MEMFS_<FLAG>` variable and a
key of the config file, with one function that reads its value from any of
them.

`MOUNT_OPTIONS` is the table; `add_options` puts it on a parser (each
argparse action keeps its `Option` as `.memfs_option`, which is how
`scripts/gen_config_doc.py` writes docs/configuration.md from the parser);
`memfs.cli._config` decides which source wins.

A value's reader (`Option.parse`) takes the text of a flag or a variable, or
the value a TOML file holds, and returns the value or raises ValueError with
the end of a sentence (`is not a number of seconds`) that the caller begins
by naming the source.
"""

from __future__ import annotations

import argparse
import logging
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .._exceptions import ConfigError
from .._logging import LOG_FORMATS, LOG_LEVELS, parse_format, parse_level
from ..supervisor import (
    MAX_SYNC_CONCURRENCY,
    MIN_SYNC_INTERVAL,
    parse_metrics_addr,
    store_arg_problem,
)

Kind = Literal["value", "switch", "list", "path"]

TRUE_WORDS = ("1", "true", "yes")
FALSE_WORDS = ("0", "false", "no")


@dataclass(frozen=True)
class Option:
    """One setting: `--<name>`, `MEMFS_<NAME>`, and `<name>` in the config file."""

    name: str
    """The flag without its dashes: `sync-interval`; also the config file's key."""
    help: str
    parse: Callable[[Any], Any]
    default: Any = None
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
        if self.default is None or self.default == []:
            return "none"
        return f"{self.default:g}" if isinstance(self.default, float) else str(self.default)


# ---------------------------------------------------------------- readers


def _text(raw: Any) -> str:
    if not isinstance(raw, str):
        raise ValueError("is not a string")
    return raw.strip()


def path_value(raw: Any) -> str:
    text = _text(raw)
    if not text:
        raise ValueError("is empty")
    return text


def seconds(*, minimum: float | None = None) -> Callable[[Any], float]:
    """A number of seconds: at least `minimum`, or more than 0 without one."""

    def parse(raw: Any) -> float:
        if isinstance(raw, bool):
            raise ValueError("is not a number of seconds")
        try:
            value = float(raw.strip() if isinstance(raw, str) else raw)
        except (TypeError, ValueError):
            raise ValueError("is not a number of seconds")
        if not math.isfinite(value):
            raise ValueError("is not a number of seconds")
        if minimum is not None and value < minimum:
            raise ValueError(f"must be at least {minimum:g} seconds")
        if minimum is None and value <= 0:
            raise ValueError("must be more than 0 seconds")
        return value

    return parse


def whole(low: int, high: int | None = None) -> Callable[[Any], int]:
    """A whole number from `low` (to `high`)."""

    def parse(raw: Any) -> int:
        if isinstance(raw, (bool, float)):
            raise ValueError("is not a whole number")
        try:
            value = int(raw.strip() if isinstance(raw, str) else raw)
        except (TypeError, ValueError):
            raise ValueError("is not a whole number")
        if high is not None and not low <= value <= high:
            raise ValueError(f"must be between {low} and {high}")
        if value < low:
            raise ValueError(f"must be {low} or more")
        return value

    return parse


def choice(*choices: str) -> Callable[[Any], str]:
    def parse(raw: Any) -> str:
        text = _text(raw)
        if text not in choices:
            raise ValueError(f"is not one of {', '.join(choices)}")
        return text

    return parse


def switch(raw: Any) -> bool:
    """A TOML boolean, or 1/0, true/false, yes/no in any case."""
    if isinstance(raw, bool):
        return raw
    text = raw.strip().lower() if isinstance(raw, str) else None
    if text in TRUE_WORDS:
        return True
    if text in FALSE_WORDS:
        return False
    raise ValueError("is not one of 1/0, true/false, yes/no")


def store_specs(raw: Any) -> list[str]:
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
    return specs


def store_spec(raw: Any) -> list[str]:
    """One `--store` flag: exactly one spec, spaces and all."""
    text = _text(raw)
    problem = store_arg_problem(text)
    if problem is not None:
        raise ValueError(problem)
    return [text]


def metrics_addr(raw: Any) -> str:
    text = _text(raw)
    try:
        parse_metrics_addr(text)
    except ConfigError:
        raise ValueError("is not HOST:PORT (e.g. 127.0.0.1:9477)") from None
    return text


def _level(raw: Any) -> str:
    return str(logging.getLevelName(parse_level(_text(raw))))


def _format(raw: Any) -> str:
    return parse_format(_text(raw))


# ---------------------------------------------------------------- the table

MOUNT_OPTIONS: tuple[Option, ...] = (
    Option(
        "store",
        "a store to mount (repeatable, at most 8); a variable holds specs separated "
        "by spaces, the config file an array",
        store_specs,
        default=[],
        kind="list",
        metavar="ID[:read_only|:read_write][=MOUNT_PATH]",
        group="stores",
    ),
    Option(
        "resources",
        "the session's resources array (JSON)",
        path_value,
        kind="path",
        metavar="FILE",
        group="stores",
    ),
    Option(
        "root",
        "where stores without a mount path go",
        path_value,
        default="/mnt/memory",
        kind="path",
        metavar="DIR",
    ),
    Option(
        "api-url",
        "the Memory Store API's base URL; after this flag and MEMFS_API_URL come "
        "ANTHROPIC_BASE_URL, the config file's api-url, the secret's api_base_url",
        path_value,
        metavar="URL",
        shown_default="https://api.anthropic.com",
    ),
    Option(
        "token-file",
        "a file holding the token (or set MEMFS_TOKEN, ANTHROPIC_API_KEY or "
        "ANTHROPIC_AUTH_TOKEN); an sk-ant-api... key travels as x-api-key",
        path_value,
        kind="path",
        metavar="FILE",
        group="credentials",
    ),
    Option(
        "secret-file",
        "a file holding the work item secret (or set MEMFS_WORK_ITEM_SECRET or "
        "ANTHROPIC_WORK_SECRET)",
        path_value,
        kind="path",
        metavar="FILE",
        group="credentials",
    ),
    Option(
        "cache-dir",
        "the local cache (per store: the contents, plus 16 MiB of redo log)",
        path_value,
        kind="path",
        metavar="DIR",
        shown_default="$XDG_CACHE_HOME/memfs or ~/.cache/memfs; /var/cache/memfs as root",
    ),
    Option(
        "uid",
        "owner shown for files",
        whole(0),
        metavar="UID",
        shown_default="the caller",
    ),
    Option(
        "gid",
        "group shown for files",
        whole(0),
        metavar="GID",
        shown_default="the caller's",
    ),
    Option("allow-other", "let other users reach the mounts", switch, default=False, kind="switch"),
    Option(
        "sync-interval",
        f"seconds between passes, at least {MIN_SYNC_INTERVAL:g}",
        seconds(minimum=MIN_SYNC_INTERVAL),
        default=15.0,
        metavar="SECONDS",
    ),
    Option(
        "sync-deletions",
        "what a local delete does in the store",
        choice("enabled", "log_only", "disabled"),
        default="enabled",
        metavar="enabled|log_only|disabled",
    ),
    Option(
        "final-sync-timeout",
        "seconds for the final sync on stop",
        seconds(),
        default=30.0,
        metavar="SECONDS",
    ),
    Option(
        "sync-concurrency",
        f"requests at once in a sync pass, 1-{MAX_SYNC_CONCURRENCY}; the final sync uses "
        f"twice as many, at most {MAX_SYNC_CONCURRENCY}",
        whole(1, MAX_SYNC_CONCURRENCY),
        default=16,
        metavar="N",
    ),
    Option(
        "metrics-addr",
        "serve Prometheus metrics of every mounted store at HOST:PORT (e.g. 127.0.0.1:9477)",
        metrics_addr,
        metavar="HOST:PORT",
    ),
    Option("daemon", "return once every store is mounted", switch, default=False, kind="switch"),
)
"""Every setting of a mount, in the order `--help` and the docs list them."""

LOG_OPTIONS: tuple[Option, ...] = (
    Option(
        "log-level",
        "the least severe records logged, by memfs and the store processes it starts; "
        "-v is INFO, -vv DEBUG",
        _level,
        metavar="|".join(LOG_LEVELS),
        shown_default="WARNING; store processes INFO",
    ),
    Option(
        "log-format",
        "text: readable lines; json: one JSON object per line",
        _format,
        default="text",
        metavar="|".join(LOG_FORMATS),
    ),
)
"""Settings every command takes (before or after its name); the config file
sets them for the commands that mount."""

CONFIG_OPTION = Option(
    "config",
    "the config file; a missing default file is no error, a missing named one is",
    path_value,
    kind="path",
    metavar="FILE",
    shown_default="$XDG_CONFIG_HOME/memfs/config.toml or ~/.config/memfs/config.toml",
)

FILE_OPTIONS: dict[str, Option] = {o.key: o for o in (*MOUNT_OPTIONS, *LOG_OPTIONS)}
"""The config file's keys."""

SECRET_KEYS = ("token", "secret", "work-item-secret", "api-key")
"""Keys the config file refuses by name: a secret goes in a file of its own."""


# ---------------------------------------------------------------- the parser


def _flag_type(read: Callable[[Any], Any]) -> Callable[[str], Any]:
    """An argparse type: the refusal names the value; argparse adds the flag."""

    def parse(text: str) -> Any:
        try:
            return read(text)
        except ValueError as e:
            raise argparse.ArgumentTypeError(f"{text!r} {e}")

    return parse


def add_option(
    p: argparse.ArgumentParser,
    option: Option,
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
        "MEMFS_RUNTIME_DIR",
        "all",
        "where state files and control sockets live (default `/run/memfs` as root, else "
        "`$XDG_RUNTIME_DIR/memfs`, else `/tmp/memfs-<uid>`)",
    ),
    ("XDG_CONFIG_HOME", "mount", "the folder of the default config file (`~/.config`)"),
    ("XDG_CACHE_HOME", "mount", "the folder of the default cache (`~/.cache`)"),
)
"""Variables that are not a flag's: (name, used by, meaning). The credential
variables are `memfs.supervisor`'s (`SECRET_ENV`, `URL_ENV`)."""
