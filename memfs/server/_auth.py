"""Who may call `memfs serve`, on which stores, and who their changes are recorded as
(docs/serve.md, "Authentication" and "Sessions"). No id recorded anywhere holds a token."""

from __future__ import annotations

import dataclasses
import hashlib
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from .._exceptions import AuthenticationFailed, ConfigError, PermissionDenied
from ..api import ActorType

_USER_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")


@dataclass(frozen=True)
class Grant:
    """One accepted token: the `stores` it is limited to (None: every store),
    the `user` or `service_account` it acts as (neither: an API key)."""

    stores: frozenset[str] | None = None
    user: str | None = None
    service_account: str | None = None


def _split_actor(token: str) -> tuple[str, Grant]:
    """`user:NAME:TOKEN` and `service_account:NAME:TOKEN` → (TOKEN, a grant
    acting as NAME); any other token → (token, an API key's grant)."""
    kind, colon, rest = token.partition(":")
    if not colon or kind not in ("user", "service_account"):
        return token, Grant()
    name, colon, secret = rest.partition(":")
    if not colon or not secret or not _USER_NAME.fullmatch(name):
        raise ConfigError(
            f"a {kind.replace('_', ' ')} token is written {kind}:NAME:TOKEN, NAME being 1 to 64"
            " of A-Z a-z 0-9 . _ -"
        )
    return secret, Grant(user=name) if kind == "user" else Grant(service_account=name)


def parse_tokens(entries: Iterable[str]) -> dict[str, Grant]:
    """Token table from `--token` values and `MEMFS_SERVE_TOKEN` pieces (docs/serve.md): a
    `memstore_` piece after a limited token adds to its stores."""
    table: dict[str, Grant] = {}
    last_limited: str | None = None
    for entry in entries:
        for piece in entry.split(","):
            piece = piece.strip()
            if not piece:
                continue
            if piece.startswith("memstore_") and last_limited is not None:
                grant = table[last_limited]
                stores = (grant.stores or frozenset()) | {piece}
                table[last_limited] = dataclasses.replace(grant, stores=stores)
                continue
            token, at, listed = piece.partition("@")
            if not token:
                raise ConfigError("a token may not be empty")
            token, grant = _split_actor(token)
            last_limited = token if at else None
            if at:
                grant = dataclasses.replace(grant, stores=frozenset({listed.strip()} - {""}))
            table[token] = grant
    return table


def _token_digest(token: str) -> str:
    """Names a token without revealing it, the same across restarts."""
    return hashlib.sha256(b"memfs-serve-actor\0" + token.encode()).hexdigest()[:24]


@dataclass(frozen=True)
class Caller:
    """Who is asking: the actor recorded on versions, the stores they may
    touch; a sessions token's session and the stores it may only read; a
    table token's `token_id`, recorded on the sessions it creates."""

    actor: dict[str, str]
    allowed: frozenset[str] | None
    session_id: str | None = None
    read_only: frozenset[str] = frozenset()
    token_id: str | None = None

    def check_store(self, store_id: str) -> None:
        """403 when a caller limited to some stores reaches for another."""
        if self.allowed is None or store_id in self.allowed:
            return
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

    def check_session(
        self, session_id: str, creator_and_stores: Callable[[], tuple[str | None, list[str]]]
    ) -> None:
        """403 when a sessions token reaches for another session than its own,
        or a token limited to some stores for a session it did not create
        unless the session holds only its stores, and at least one."""
        if self.session_id is not None and session_id != self.session_id:
            raise PermissionDenied(
                f"this sessions token belongs to session {self.session_id}, not {session_id}"
            )
        if self.allowed is None or self.session_id is not None:
            return
        created_by, held = creator_and_stores()
        if created_by == self.token_id:
            return
        if not held:
            raise PermissionDenied(
                f"these credentials may not use session {session_id}: other credentials"
                " created it, and it holds no memory store of theirs"
            )
        for store_id in held:
            self.check_store(store_id)


def caller_for_grant(token: str, grant: Grant) -> Caller:
    """The caller a token of the table is, whatever header it came in: its
    changes are recorded as its user, its service account, or an API key."""
    if grant.user is not None:
        actor = {"type": ActorType.USER.value, "user_id": "user_" + grant.user}
    elif grant.service_account is not None:
        actor = {
            "type": ActorType.SERVICE_ACCOUNT.value,
            "service_account_id": "svac_" + grant.service_account,
        }
    else:
        actor = {"type": ActorType.API.value, "api_key_id": "apikey_" + _token_digest(token)}
    return Caller(actor, grant.stores, token_id=_token_digest(token))


def authenticate(
    headers: Mapping[str, str],
    callers: Mapping[str, Caller],
    sessions: Callable[[str], Caller | None],
) -> Caller:
    """The caller a request's `Authorization: Bearer` or `x-api-key` header
    names: one of `callers` (the table's tokens), else (as a bearer token
    only) the session whose token it is; 401 otherwise."""
    token, bearer = headers.get("x-api-key"), False
    kind, _, value = (headers.get("authorization") or "").partition(" ")
    if kind.lower() == "bearer" and value.strip():
        token, bearer = value.strip(), True
    if not token:
        raise AuthenticationFailed(
            "no credentials: send Authorization: Bearer <token> or x-api-key: <token>"
        )
    caller = callers.get(token) or (sessions(token) if bearer else None)
    if caller is None:
        raise AuthenticationFailed("invalid credentials: this token is not accepted")
    return caller
