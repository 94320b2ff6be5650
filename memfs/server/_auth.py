"""Who may call `memfs serve`, on which stores, and who their changes are
recorded as.

Tokens: each accepted token may be restricted to some stores, written
`TOKEN@STORE_ID[,STORE_ID...]`; a restricted token gets 403 on any other store
and cannot create stores. A token is an API key: its changes are recorded as
an `api_actor` whichever header carries it (`x-api-key`, or `Authorization:
Bearer` as the SDKs send `api_key=`). A token written `user:NAME:TOKEN`
(restricted or not) acts as a person instead (`user_actor` `user_NAME`), one
written `service_account:NAME:TOKEN` as a service account
(`service_account_actor` `svac_NAME`). No id recorded anywhere holds a token.

Sessions tokens are minted by the server, one per session (`_sessions`),
and taken as `Authorization: Bearer` only. One reaches the stores attached to
its session now, writes only those attached read-write, manages no store and
no session, and is recorded as the `session_actor` of its session.

Which sessions a token of the table reaches: an unlimited one every session;
one limited to some stores the sessions it created, and those that hold only
its stores and at least one (an empty session someone else created is not
"a session of its stores").
"""

from __future__ import annotations

import functools
import hashlib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from .._exceptions import AuthenticationFailed, ConfigError, PermissionDenied
from ..api import ActorType

USER_PREFIX = "user:"
SERVICE_ACCOUNT_PREFIX = "service_account:"
_USER_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")

# The header a token came in: `Authorization: Bearer` or `x-api-key`.
Scheme = Literal["bearer", "api_key"]


@dataclass(frozen=True)
class Grant:
    """What one accepted token may do: `stores` it is limited to (None: every
    store), and the `user` or `service_account` it acts as (neither: an API
    key)."""

    stores: frozenset[str] | None = None
    user: str | None = None
    service_account: str | None = None

    def limited_to(self, stores: frozenset[str] | None) -> Grant:
        return Grant(stores, self.user, self.service_account)


def _split_actor(token: str) -> tuple[str, Grant]:
    """`user:NAME:TOKEN` and `service_account:NAME:TOKEN` → (TOKEN, a grant
    acting as NAME); any other token → (token, an API key's grant)."""
    for prefix, what in ((USER_PREFIX, "user"), (SERVICE_ACCOUNT_PREFIX, "service account")):
        if not token.startswith(prefix):
            continue
        name, colon, secret = token[len(prefix) :].partition(":")
        if not colon or not secret or not _USER_NAME.fullmatch(name):
            raise ConfigError(
                f"a {what} token is written {prefix}NAME:TOKEN, NAME being 1 to 64 of"
                " A-Z a-z 0-9 . _ -"
            )
        if prefix == USER_PREFIX:
            return secret, Grant(user=name)
        return secret, Grant(service_account=name)
    return token, Grant()


def parse_tokens(entries: Iterable[str]) -> dict[str, Grant]:
    """Token table from `--token` values and `MEMFS_SERVE_TOKEN` pieces.

    Each entry is `TOKEN` (every store) or `TOKEN@STORE_ID[,STORE_ID...]`,
    where TOKEN may be `user:NAME:TOKEN` to act as that user, or
    `service_account:NAME:TOKEN` as that service account. Entries may be
    comma-separated; a piece starting with `memstore_` that follows a
    restricted token adds to that token's stores."""
    table: dict[str, Grant] = {}
    last_restricted: str | None = None
    for entry in entries:
        for piece in entry.split(","):
            piece = piece.strip()
            if not piece:
                continue
            if piece.startswith("memstore_") and last_restricted is not None:
                grant = table[last_restricted]
                table[last_restricted] = grant.limited_to((grant.stores or frozenset()) | {piece})
                continue
            token, at, listed = piece.partition("@")
            if not token:
                raise ConfigError("a token may not be empty")
            token, grant = _split_actor(token)
            if at:
                allowed = frozenset(s for s in (x.strip() for x in listed.split(",")) if s)
                table[token] = grant.limited_to(allowed)
                last_restricted = token
            else:
                table[token] = grant
                last_restricted = None
    return table


def actor_for(token: str, grant: Grant) -> dict[str, str]:
    """Who made a change, as versions record it, derived from the token so it
    is stable across restarts and never reveals the token, whatever header
    it came in: a token configured for a user is a `user_actor` with
    `user_id` `user_<name>`, one for a service account a
    `service_account_actor` with `service_account_id` `svac_<name>`, any
    other an `api_actor` with `api_key_id` `apikey_<hash>`. (Only a sessions
    token is a `session_actor`: see `authenticate`.)"""
    if grant.user is not None:
        return {"type": ActorType.USER.value, "user_id": "user_" + grant.user}
    if grant.service_account is not None:
        return {
            "type": ActorType.SERVICE_ACCOUNT.value,
            "service_account_id": "svac_" + grant.service_account,
        }
    return {"type": ActorType.API.value, "api_key_id": "apikey_" + _token_digest(token)}


@functools.lru_cache(maxsize=1024)
def _token_digest(token: str) -> str:
    """Hashed once per accepted token (the table holds them all anyway)."""
    return hashlib.sha256(b"memfs-serve-actor\0" + token.encode()).hexdigest()[:24]


@dataclass(frozen=True)
class Caller:
    """Who is asking: the actor recorded on versions and the stores they may
    touch; for a sessions token, its session and the stores it may only read;
    for a token of the table, `token_id`, which names that token without
    revealing it (the same across restarts), for the sessions it creates."""

    actor: dict[str, str]
    allowed: frozenset[str] | None
    session_id: str | None = None
    read_only: frozenset[str] = frozenset()
    token_id: str | None = None

    def check_store(self, store_id: str) -> None:
        """403 when a token restricted to some stores reaches for another."""
        if self.allowed is not None and store_id not in self.allowed:
            if self.session_id is not None:
                raise PermissionDenied(
                    f"this sessions token reaches only the memory stores of session"
                    f" {self.session_id}, not {store_id}"
                )
            raise PermissionDenied(f"these credentials may not use memory store {store_id}")

    def check_write(self, store_id: str) -> None:
        """`check_store`, and 403 when the caller's session has the store read-only."""
        self.check_store(store_id)
        if store_id in self.read_only:
            raise PermissionDenied(
                f"session {self.session_id} has memory store {store_id} attached read-only"
            )

    def check_not_session(self, what: str) -> None:
        """403 for a sessions token, which may not do `what` (a sentence's end)."""
        if self.session_id is not None:
            raise PermissionDenied(f"a sessions token cannot {what}")

    def check_session(self, session_id: str) -> None:
        """403 when a sessions token reaches for another session than its own."""
        if self.session_id is not None and session_id != self.session_id:
            raise PermissionDenied(
                f"this sessions token belongs to session {self.session_id}, not {session_id}"
            )

    def check_session_stores(
        self, session_id: str, created_by: str | None, store_ids: Iterable[str]
    ) -> None:
        """403 when a token limited to some stores reaches for a session it did
        not create (`created_by`, a `token_id`) unless the session holds only
        its stores, and at least one."""
        if self.allowed is None or self.session_id is not None or created_by == self.token_id:
            return
        held = list(store_ids)
        if not held:
            raise PermissionDenied(
                f"these credentials may not use session {session_id}: other credentials"
                " created it, and it holds no memory store of theirs"
            )
        for store_id in held:
            self.check_store(store_id)


@dataclass(frozen=True)
class SessionGrant:
    """What a sessions token reaches: its session, the stores attached to it
    now, and which of them are attached read-only."""

    session_id: str
    stores: frozenset[str]
    read_only: frozenset[str]


SessionLookup = Callable[[str], SessionGrant | None]
"""A sessions token's grant, None when no live session has that token."""


def grants(tokens: Mapping[str, Grant | frozenset[str] | None]) -> dict[str, Grant]:
    """Each accepted token's `Grant`; a bare store set or None stands for
    `Grant(stores)`, as before grants had users."""
    return {
        token: grant if isinstance(grant, Grant) else Grant(grant)
        for token, grant in tokens.items()
    }


def authenticate(
    headers: Mapping[str, str],
    table: Mapping[str, Grant],
    sessions: SessionLookup | None = None,
) -> Caller:
    """The caller a request's `Authorization: Bearer` or `x-api-key` header
    names: a token of the table, else (as a bearer token) a session's token
    that `sessions` finds; 401 when it names none, or a token neither holds."""
    token: str | None = None
    scheme: Scheme = "api_key"
    authorization = headers.get("authorization")
    if authorization:
        kind, _, value = authorization.partition(" ")
        if kind.lower() == "bearer" and value.strip():
            token, scheme = value.strip(), "bearer"
    if token is None:
        token = headers.get("x-api-key")
    if not token:
        raise AuthenticationFailed(
            "no credentials: send Authorization: Bearer <token> or x-api-key: <token>"
        )
    grant = table.get(token)
    if grant is not None:
        return Caller(actor_for(token, grant), grant.stores, token_id=_token_digest(token))
    if sessions is not None and scheme == "bearer":
        found = sessions(token)
        if found is not None:
            actor = {"type": ActorType.SESSION.value, "session_id": found.session_id}
            return Caller(actor, found.stores, found.session_id, found.read_only)
    raise AuthenticationFailed("invalid credentials: this token is not accepted")
