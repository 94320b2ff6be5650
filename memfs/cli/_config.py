"""Where each setting comes from: its flag, else its `MEMFS_<FLAG>`
variable, else the config file, else its default (docs/configuration.md
draws the whole order as one table).

- The config file is `--config FILE` (or `MEMFS_CONFIG`), else
  `$XDG_CONFIG_HOME/memfs/config.toml` (`~/.config/memfs/config.toml`),
  read with `tomllib`. A missing default file is no error; a missing named
  one is. Its keys are the flags' names without the dashes, spelled with
  dashes as the flags are (`sync-interval = 30`), so that one name serves
  the flag, the key and the docs; a key memfs does not know is refused,
  with a hint when it is a flag's name spelled with underscores. Paths in
  it may start with `~` and are relative to the file's folder.
- The file holds no secret: `token` and `secret` are refused by name, and
  `token-file` / `secret-file` name files that hold them. A file another
  user could change (world-writable, or owned by someone other than the
  caller or root) is refused, since it could send the token elsewhere
  (`api-url`).
- Every value present is checked, even one a higher source overrides: a
  bad value anywhere is refused before anything mounts, in one sentence
  that names its source, exit status 2.
- Options of a group come from one source together: `store` and
  `resources` (which stores), `token-file` and `secret-file` (which
  credentials; from the file they rank after every credential variable).

`settle` does all of it once, before the command runs, and returns the
`Settings` the command reads: for a command that mounts, its
`MountSettings`, one typed, frozen object.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import stat
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from .._exceptions import ConfigError
from .._logging import LogFormat
from ..supervisor import ConfigFallback, Credentials, MountSettings, resolve_credentials
from ._options import (
    ALLOW_OTHER,
    API_URL,
    CACHE_DIR,
    CACHE_SIZE,
    CONFIG_OPTION,
    DAEMON,
    FILE_OPTIONS,
    FINAL_SYNC_TIMEOUT,
    GID,
    LOG_FORMAT,
    LOG_LEVEL,
    LOG_OPTIONS,
    METRICS_ADDR,
    RESOURCES,
    ROOT,
    SECRET_FILE,
    SECRET_KEYS,
    SESSION,
    SESSION_CHECK_INTERVAL,
    START_TIMEOUT,
    STORE,
    SYNC_CONCURRENCY,
    SYNC_DELETIONS,
    SYNC_INTERVAL,
    TOKEN_FILE,
    UID,
    WORK_ITEM,
    WRITE_BEHIND,
    Option,
)

log = logging.getLogger("memfs")

FLAG, ENV, FILE, DEFAULT = "flag", "environment", "file", "default"
TIERS = (FLAG, ENV, FILE, DEFAULT)
"""The sources, strongest first."""


T = TypeVar("T")


@dataclass(frozen=True)
class Found(Generic[T]):
    """A setting's value and where it came from: `--sync-interval`,
    `MEMFS_SYNC_INTERVAL`, the config file's path, or `default`."""

    value: T
    tier: str
    source: str


@dataclass(frozen=True)
class ConfigFile:
    path: str
    values: dict[str, object]


class Chosen:
    """Each option's value, as `choose` found it, by option."""

    def __init__(self, found: Mapping[str, Found[Any]]) -> None:
        self.found = dict(found)
        """dest -> its value and source."""

    def value(self, option: Option[T]) -> T:
        found: Found[T] = self.found[option.dest]
        return found.value


@dataclass(frozen=True)
class Settings:
    """What `settle` made of the flags, the variables, the config file and the
    defaults, for one command."""

    log_level: str | None
    """A level name for the store processes; None for their own default."""
    log_format: LogFormat
    cli_log_level: int
    """This process's level."""
    sources: Mapping[str, Found[Any]]
    """Where each setting came from, by dest."""
    config_file: str | None = None
    """The config file read, if any."""
    mount: MountSettings | None = None
    """The settings of a command that mounts; None for the others."""


def default_config_path(env: Mapping[str, str]) -> str:
    base = env.get("XDG_CONFIG_HOME", "").strip() or os.path.expanduser("~/.config")
    return os.path.join(base, "memfs", "config.toml")


def _toml(raw: Any) -> str:
    """A value as the file wrote it, for a sentence."""
    if isinstance(raw, bool):
        return "true" if raw else "false"
    if isinstance(raw, str):
        return json.dumps(raw, ensure_ascii=False)
    if isinstance(raw, list):
        return "[" + ", ".join(_toml(x) for x in raw) + "]"
    if isinstance(raw, dict):
        return "a table"
    return str(raw)


def load_config_file(path: str, *, named: bool) -> ConfigFile | None:
    """The config file's settings, every key checked; None when the default
    file does not exist."""
    try:
        with open(path, "rb") as f:
            st = os.fstat(f.fileno())
            data = f.read()
    except FileNotFoundError:
        if named:
            raise ConfigError(f"the config file {path} does not exist")
        return None
    except OSError as e:
        raise ConfigError(f"cannot read the config file {path}: {e.strerror or e}")
    if st.st_uid not in (os.geteuid(), 0):
        raise ConfigError(
            f"the config file {path} belongs to another user (uid {st.st_uid}); "
            "memfs reads only its own or root's"
        )
    if st.st_mode & stat.S_IWOTH:
        raise ConfigError(
            f"the config file {path} can be written by every user "
            f"(mode {stat.S_IMODE(st.st_mode):04o}); make it 0600 or 0644"
        )
    try:
        values = tomllib.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise ConfigError(f"the config file {path} is not UTF-8 text")
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"the config file {path} is not TOML: {e}")
    for key in values:
        if key in SECRET_KEYS:
            raise ConfigError(
                f"{key} in {path} is not taken: a secret does not go in the config file; "
                "name a file that holds it with token-file (or secret-file for a work item secret)"
            )
        if key not in FILE_OPTIONS:
            dashed = key.replace("_", "-")
            hint = f"; did you mean {dashed}?" if dashed in FILE_OPTIONS else ""
            raise ConfigError(f"{key} in {path} is not a memfs setting{hint}")
    return ConfigFile(path, values)


def _from_env(option: Option[T], env: Mapping[str, str]) -> Found[T] | None:
    raw = env.get(option.env)
    if raw is None or not raw.strip():  # a variable set to blanks counts as unset
        return None
    try:
        value = option.parse(raw)
    except ValueError as e:
        raise ConfigError(f"{option.env}={raw.strip()} (environment) {e}")
    return Found(value, ENV, option.env)


def _from_file(option: Option[T], config: ConfigFile | None) -> Found[T] | None:
    if config is None or option.key not in config.values:
        return None
    raw = config.values[option.key]
    value: Any  # a path's text, then that path from the file's folder
    try:
        value = option.parse(raw)
    except ValueError as e:
        raise ConfigError(f"{option.key} = {_toml(raw)} in {config.path} {e}")
    if option.kind == "path":
        value = os.path.join(os.path.dirname(config.path), os.path.expanduser(value))
    return Found(value, FILE, config.path)


def _from_flag(option: Option[T], args: argparse.Namespace) -> Found[T] | None:
    value: Any = getattr(args, option.dest, None)  # argparse's, of `option.parse`
    if value is None or value == []:
        return None
    if option.kind == "list":
        value = tuple(value)  # argparse's list of the flags
    return Found(value, FLAG, option.flag)


def choose(
    options: Sequence[Option[Any]],
    args: argparse.Namespace,
    env: Mapping[str, str],
    config: ConfigFile | None,
) -> Chosen:
    """Each option's value by dest: the strongest source that sets it (for a
    group, that sets any of its options). Every source's value is read, so
    that a bad one is refused even where a stronger source overrides it."""
    candidates: dict[str, dict[str, Found[Any]]] = {}
    for option in options:
        found = {
            tier: f
            for tier, f in (
                (FLAG, _from_flag(option, args)),
                (ENV, _from_env(option, env)),
                (FILE, _from_file(option, config)),
            )
            if f is not None
        }
        found[DEFAULT] = Found(option.default, DEFAULT, DEFAULT)
        candidates[option.dest] = found
    chosen: dict[str, Found[Any]] = {}
    for option in options:
        members = [o for o in options if option.group and o.group == option.group] or [option]
        tier = next(t for t in TIERS if any(t in candidates[m.dest] for m in members))
        own = candidates[option.dest]
        chosen[option.dest] = own.get(tier) or own[DEFAULT]
    return Chosen(chosen)


def mount_settings(chosen: Chosen) -> MountSettings:
    """The settings of a command that mounts, from the values `choose` found."""
    return MountSettings(
        store=chosen.value(STORE),
        resources=chosen.value(RESOURCES),
        work_item=chosen.value(WORK_ITEM),
        session=chosen.value(SESSION),
        root=chosen.value(ROOT),
        api_url=chosen.value(API_URL),
        token_file=chosen.value(TOKEN_FILE),
        secret_file=chosen.value(SECRET_FILE),
        cache_dir=chosen.value(CACHE_DIR),
        uid=chosen.value(UID),
        gid=chosen.value(GID),
        allow_other=chosen.value(ALLOW_OTHER),
        sync_interval=chosen.value(SYNC_INTERVAL),
        sync_deletions=chosen.value(SYNC_DELETIONS),
        final_sync_timeout=chosen.value(FINAL_SYNC_TIMEOUT),
        sync_concurrency=chosen.value(SYNC_CONCURRENCY),
        start_timeout=chosen.value(START_TIMEOUT),
        write_behind=chosen.value(WRITE_BEHIND),
        cache_size=chosen.value(CACHE_SIZE),
        session_check_interval=chosen.value(SESSION_CHECK_INTERVAL),
        metrics_addr=chosen.value(METRICS_ADDR),
        daemon=chosen.value(DAEMON),
    )


def settle(args: argparse.Namespace, env: Mapping[str, str]) -> Settings:
    """Every setting of the command `args` holds: its flag, else the
    environment, else the config file (commands that mount), else the
    default; ConfigError for a bad value from any of them. The log level is
    a level name for the store processes (None for their own default), and
    `cli_log_level` a number for this process."""
    options: Sequence[Option[Any]] = getattr(args, "_settings", ())
    config = None
    if options:
        named = _from_flag(CONFIG_OPTION, args) or _from_env(CONFIG_OPTION, env)
        path = named.value if named and named.value else default_config_path(env)
        config = load_config_file(path, named=named is not None)
    chosen = choose(options, args, env, config)
    logs = choose(LOG_OPTIONS, args, env, config)
    level = logs.found[LOG_LEVEL.dest]
    if level.tier != FLAG and args.verbose:
        name = "DEBUG" if args.verbose > 1 else "INFO"
        level = Found(name, FLAG, "-v" * min(args.verbose, 2))
    return Settings(
        log_level=level.value,
        log_format=logs.value(LOG_FORMAT),
        cli_log_level=logging.getLevelName(level.value) if level.value else logging.WARNING,
        sources={**chosen.found, **logs.found, LOG_LEVEL.dest: level},
        config_file=config.path if config else None,
        mount=mount_settings(chosen) if options else None,
    )


def log_sources(settings: Settings) -> None:
    """At DEBUG, where each setting that is not its default came from."""
    for dest, found in settings.sources.items():
        if found.tier != DEFAULT and found.value is not None:
            # A list of stores is shown as the command line always showed it.
            value = list(found.value) if isinstance(found.value, tuple) else found.value
            log.debug("%s is %s (from %s)", dest.replace("_", "-"), value, found.source)


def mount_credentials(
    settings: Settings,
    env: Mapping[str, str] | None = None,
    *,
    work_item_secret: str | None = None,
    work_item_source: str = "the work item",
    for_session: bool = False,
) -> Credentials | None:
    """The credentials for a mount: `--token-file` / `--secret-file` or their
    variables first, then the work item's secret, then the credential
    variables (`ANTHROPIC_API_KEY` and `ANTHROPIC_AUTH_TOKEN` only when no
    secret is given anywhere, and never `for_session`), then the config file's `token-file` /
    `secret-file`; the URL from `--api-url`, its variable,
    `ANTHROPIC_BASE_URL`, the config file, the secret, the public API."""
    sources = settings.sources
    token: Found[str | None] = sources[TOKEN_FILE.dest]
    secret: Found[str | None] = sources[SECRET_FILE.dest]
    url: Found[str | None] = sources[API_URL.dest]
    fallback = None
    token_file = secret_file = api_url = None
    if FILE in (token.tier, secret.tier, url.tier):
        fallback = ConfigFallback(
            token_file=token.value if token.tier == FILE else None,
            secret_file=secret.value if secret.tier == FILE else None,
            api_url=url.value if url.tier == FILE else None,
            where=settings.config_file or "",
        )
    if token.tier in (FLAG, ENV):
        token_file = token.value
    if secret.tier in (FLAG, ENV):
        secret_file = secret.value
    if url.tier in (FLAG, ENV):
        api_url = url.value
    return resolve_credentials(
        api_url=api_url,
        token_file=token_file,
        secret_file=secret_file,
        token_file_source=token.source,
        secret_file_source=secret.source,
        fallback=fallback,
        env=env,
        work_item_secret=work_item_secret,
        work_item_source=work_item_source,
        for_session=for_session,
    )
