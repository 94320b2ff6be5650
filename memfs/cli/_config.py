"""Where each setting comes from: its flag, else its variable, else the config file, else its
default (docs/configuration.md). For `mount` and `run` every value present is read, even one a
stronger source overrides, so that a bad one anywhere is refused, naming its source, before the
command runs."""

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
    API_URL,
    CONFIG_OPTION,
    FILE_OPTIONS,
    HIDDEN,
    LOG_FORMAT,
    LOG_LEVEL,
    LOG_OPTIONS,
    SECRET_FILE,
    SECRET_KEYS,
    TOKEN_FILE,
    Option,
    looks_like_token,
)

log = logging.getLogger("memfs")

FLAG, ENV, FILE, DEFAULT = "flag", "environment", "file", "default"
TIERS = (FLAG, ENV, FILE, DEFAULT)
"""The sources, strongest first."""

T = TypeVar("T")


@dataclass(frozen=True)
class Found(Generic[T]):
    """A setting's value, its tier, and its source: `--sync-interval`,
    `MEMFS_SYNC_INTERVAL`, the config file's path, or `default`."""

    value: T
    tier: str
    source: str


@dataclass(frozen=True)
class ConfigFile:
    path: str
    values: dict[str, object]


@dataclass(frozen=True)
class Settings:
    log_level: str | None
    """A level name for the store processes; None for their own default."""
    log_format: LogFormat
    cli_log_level: int
    """This process's level."""
    sources: Mapping[str, Found[Any]]
    """Each setting's value and source, by dest."""
    config_file: str | None = None
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
    return "a table" if isinstance(raw, dict) else str(raw)


def load_config_file(path: str, *, named: bool) -> ConfigFile | None:
    """The config file's settings, every key checked; None for a missing default file."""
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
        return Found(option.parse(raw), ENV, option.env)
    except ValueError as e:
        shown = HIDDEN if looks_like_token(raw.strip()) else raw.strip()
        raise ConfigError(f"{option.env}={shown} (environment) {e}")


def _from_file(option: Option[T], config: ConfigFile | None) -> Found[T] | None:
    if config is None or option.name not in config.values:
        return None
    raw = config.values[option.name]
    value: Any
    try:
        value = option.parse(raw)
    except ValueError as e:
        shown = HIDDEN if isinstance(raw, str) and looks_like_token(raw) else _toml(raw)
        raise ConfigError(f"{option.name} = {shown} in {config.path} {e}")
    if option.kind == "path":
        value = os.path.join(os.path.dirname(config.path), os.path.expanduser(value))
    return Found(value, FILE, config.path)


def _from_flag(option: Option[T], args: argparse.Namespace) -> Found[T] | None:
    value: Any = getattr(args, option.dest, None)
    if value is None:
        return None
    if option.kind == "list":
        value = tuple(value)
    return Found(value, FLAG, option.flag)


def choose(
    options: Sequence[Option[Any]],
    args: argparse.Namespace,
    env: Mapping[str, str],
    config: ConfigFile | None,
) -> dict[str, Found[Any]]:
    """Each option's value by dest, from the strongest source that sets it (or any of its group)."""
    candidates: dict[str, dict[str, Found[Any]]] = {}
    for option in options:
        found = (_from_flag(option, args), _from_env(option, env), _from_file(option, config))
        candidates[option.dest] = {f.tier: f for f in found if f is not None}
        candidates[option.dest][DEFAULT] = Found(option.default, DEFAULT, DEFAULT)
    chosen: dict[str, Found[Any]] = {}
    for option in options:
        members = [o for o in options if option.group and o.group == option.group] or [option]
        tier = next(t for t in TIERS if any(t in candidates[m.dest] for m in members))
        own = candidates[option.dest]
        chosen[option.dest] = own.get(tier) or own[DEFAULT]
    return chosen


def settle(args: argparse.Namespace, env: Mapping[str, str]) -> Settings:
    """Every setting of the command `args` holds. `-v`/`-vv` count as a log
    level flag below `--log-level`."""
    options: Sequence[Option[Any]] = getattr(args, "_settings", ())
    config = None
    if options:
        named = _from_flag(CONFIG_OPTION, args) or _from_env(CONFIG_OPTION, env)
        path = named.value if named and named.value else default_config_path(env)
        config = load_config_file(path, named=named is not None)
    chosen = choose(options, args, env, config)
    logs = choose(LOG_OPTIONS, args, env, config)
    level = logs[LOG_LEVEL.dest]
    if level.tier != FLAG and args.verbose:
        name = "DEBUG" if args.verbose > 1 else "INFO"
        level = Found(name, FLAG, "-v" * min(args.verbose, 2))
    return Settings(
        log_level=level.value,
        log_format=logs[LOG_FORMAT.dest].value,
        cli_log_level=logging.getLevelName(level.value) if level.value else logging.WARNING,
        sources={**chosen, **logs, LOG_LEVEL.dest: level},
        config_file=config.path if config else None,
        mount=MountSettings(**{d: f.value for d, f in chosen.items()}) if options else None,
    )


def log_sources(settings: Settings) -> None:
    """At DEBUG, where each setting that is not its default came from."""
    for dest, found in settings.sources.items():
        if found.tier != DEFAULT and found.value is not None:
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
    """The credentials for a mount: the config file's `token-file`,
    `secret-file` and `api-url` count only after every credential variable."""
    token, secret, url = (settings.sources[o.dest] for o in (TOKEN_FILE, SECRET_FILE, API_URL))

    def given(found: Found[str | None], in_file: bool) -> str | None:
        return found.value if (found.tier == FILE) == in_file else None

    creds = resolve_credentials(
        api_url=given(url, False),
        token_file=given(token, False),
        secret_file=given(secret, False),
        token_file_source=token.source,
        secret_file_source=secret.source,
        fallback=ConfigFallback(
            given(token, True), given(secret, True), given(url, True), settings.config_file or ""
        ),
        env=env,
        work_item_secret=work_item_secret,
        work_item_source=work_item_source,
        for_session=for_session,
    )
    if creds is not None:
        log.info("the token comes from %s and travels as %s", creds.source, creds.auth)
    return creds
