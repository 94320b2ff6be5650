"""Where `memfs mount` (and `memfs store`) find the token, which header it
travels in, and the API's URL. Secrets reach a store process only on its
stdin (`StoreSpec`), never by its environment or argv."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from .._exceptions import ConfigError
from ..api import DEFAULT_API_URL, SERVE_TOKEN_ENV, parse_work_item_secret
from ..control import AuthHeader

AUTH_BEARER: AuthHeader = "bearer"
AUTH_API_KEY: AuthHeader = "x-api-key"
API_KEY_PREFIX = "sk-ant-api"
"""A token that starts so is an API key, sent as `x-api-key`; any other as a bearer token."""

_Found = Literal["token", "secret", "bearer", "x-api-key"]
"""What a source holds: a token, a work item secret, or a token that always
travels in one header."""

# Where credentials come from after the flags, in their order of precedence.
_ENV_SOURCES: tuple[tuple[str, _Found], ...] = (
    ("MEMFS_TOKEN", "token"),
    ("MEMFS_WORK_ITEM_SECRET", "secret"),
    ("ANTHROPIC_WORK_SECRET", "secret"),
    ("ANTHROPIC_API_KEY", AUTH_API_KEY),
    ("ANTHROPIC_AUTH_TOKEN", AUTH_BEARER),
)
WORKER_OWN_ENV = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")
"""A worker host's own credentials: never used when a work item secret is given."""
URL_ENV = ("MEMFS_API_URL", "ANTHROPIC_BASE_URL")
CREDENTIAL_SOURCES = (*(name for name, _ in _ENV_SOURCES), SERVE_TOKEN_ENV)
"""The variables memfs reads secrets from: every one is in `SECRET_ENV`."""


@dataclass(frozen=True)
class Credentials:
    api_url: str
    token: str = field(repr=False)
    auth: AuthHeader = AUTH_BEARER
    source: str = field(default="", compare=False)
    """Where the token came from: a flag or a variable's name (never the value)."""


@dataclass(frozen=True)
class ConfigFallback:
    """What the config file (`where`) names: used only when no flag and no
    variable gives a token (or a URL)."""

    token_file: str | None = None
    secret_file: str | None = None
    api_url: str | None = None
    where: str = ""


def read_secret_file(path: str, what: str) -> str:
    """The text of the `what` file; ConfigError, quoting nothing of it, when
    it cannot be read or is not UTF-8."""
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError as e:
        raise ConfigError(f"cannot read the {what} file {path}: {e.strerror or e}")
    except UnicodeDecodeError:
        raise ConfigError(f"the {what} file {path} is not UTF-8 text")


def _read_secret_file(path: str, what: str) -> str:
    value = read_secret_file(path, what).strip()
    if not value:
        raise ConfigError(f"the {what} file {path} is empty")
    return value


def resolve_credentials(
    *,
    api_url: str | None,
    token_file: str | None = None,
    secret_file: str | None = None,
    env: Mapping[str, str] | None = None,
    default_url: str = DEFAULT_API_URL,
    token_file_source: str = "--token-file",
    secret_file_source: str = "--secret-file",
    fallback: ConfigFallback | None = None,
    work_item_secret: str | None = None,
    work_item_source: str = "the work item",
    for_session: bool = False,
) -> Credentials | None:
    """The token, how it travels, and the URL; None when there is no token.

    Token, first found: --token-file, --secret-file (`*_source` names the
    variable either came from), `work_item_secret`, then `_ENV_SOURCES` in
    order, then `fallback` (the config file's). When a work item secret is
    given by any source, or `for_session` (a session's work), the host's own
    `WORKER_OWN_ENV` are not read. A token is an API key (x-api-key) when it
    starts with `sk-ant-api`, else a bearer token, as a secret's sessions
    token is. URL, first found: `api_url`, `URL_ENV`, the fallback's, the
    secret's api_base_url, `default_url`. A variable set to blanks is unset."""
    env = os.environ if env is None else env

    def given(name: str) -> bool:
        return bool(env.get(name, "").strip())

    secret_given = bool(
        secret_file
        or work_item_secret
        or given("MEMFS_WORK_ITEM_SECRET")
        or given("ANTHROPIC_WORK_SECRET")
        or (fallback is not None and fallback.secret_file)
    )
    found: tuple[str, _Found, str] | None = None  # (source, what it holds, text)
    if token_file:
        found = (token_file_source, "token", _read_secret_file(token_file, "token"))
    elif secret_file:
        found = (secret_file_source, "secret", _read_secret_file(secret_file, "work item secret"))
    elif work_item_secret:
        found = (work_item_source, "secret", work_item_secret.strip())
    else:
        for name, kind in _ENV_SOURCES:
            if (secret_given or for_session) and name in WORKER_OWN_ENV:
                continue
            if given(name):
                found = (name, kind, env[name].strip())
                break
    if found is None and fallback is not None:
        if fallback.token_file:
            text = _read_secret_file(fallback.token_file, "token")
            found = (f"token-file in {fallback.where}", "token", text)
        elif fallback.secret_file:
            text = _read_secret_file(fallback.secret_file, "work item secret")
            found = (f"secret-file in {fallback.where}", "secret", text)
    if found is None:
        return None
    source, kind, text = found
    secret_url = None
    auth: AuthHeader
    if kind == "secret":
        secret = parse_work_item_secret(text)
        token, auth, secret_url = secret.sessions_token, AUTH_BEARER, secret.api_base_url
    elif kind == "token":
        token, auth = text, AUTH_API_KEY if text.startswith(API_KEY_PREFIX) else AUTH_BEARER
    else:
        token, auth = text, kind
    url = api_url or next((env[n].strip() for n in URL_ENV if given(n)), None)
    url = url or (fallback.api_url if fallback else None) or secret_url or default_url
    return Credentials(url.rstrip("/"), token, auth, source)
