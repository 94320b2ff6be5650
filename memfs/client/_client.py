"""The Memory Store API over httpx: auth, retries, pages, one exception tree.

`StoreClient` is the only way memfs talks to a store, whether the real
service or `memfs serve`. It runs under trio (httpx reaches trio through
anyio). What it promises:

- Every request carries `anthropic-version`, `anthropic-beta`, the auth header
  and `user-agent: memfs/<version>`, and `?beta=true` on its URL, as the SDKs
  send it; session requests carry the Managed Agents beta (`_sessions`). The token is never logged and never shown by `repr()`.
- One bounded connection pool per client; or any httpx transport given as
  `transport` (`httpx.ASGITransport` drives `memfs serve`'s app in-process).
- Retries of what may be retried, with backoff and jitter, every attempt
  counted in `stats` (`_sending`). With `start_timeout` (a mount's start),
  the API's first answer is awaited at most that long in all, in short
  attempts, each one without an answer handed to `on_wait`.
- Every failure is a `memfs._exceptions.StoreError`: a `StatusError` subclass
  for an error answer, `TransportError` when no answer came after every retry
  (`_errors`). No httpx exception escapes.
- Retrying a request that is not idempotent can meet the effect of its own
  earlier attempt; `create_memory`, `update_memory` and `delete_memory`
  recognise that case and report success (see each, in `_endpoints`).
"""

from __future__ import annotations

import ssl
from collections.abc import Callable

import httpx

from .._exceptions import ConfigError
from .._version import __version__
from ..api import ANTHROPIC_VERSION, BETA, AuthHeader
from ._endpoints import MemoryEndpoints, StoreEndpoints, VersionEndpoints
from ._sending import ClientStats, RetryPolicy, Sender, StartWait
from ._sessions import SessionEndpoints


def _tls_for(base_url: str) -> ssl.SSLContext | bool:
    """An http:// API (`memfs serve` on loopback) sets up no TLS, so a mount's
    start does not load the CA bundle. Its context trusts no CA at all, so it
    could never accept a certificate; https:// gets httpx's default."""
    if base_url.lower().startswith("http://"):
        return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    return True


class StoreClient(StoreEndpoints, MemoryEndpoints, VersionEndpoints, SessionEndpoints):
    """Async client of the Memory Store API; use under trio.

    `async with StoreClient(url, token) as c:` or call `aclose()` when done.
    `auth` picks the header the token travels in: `Authorization: Bearer`
    (a session's token) or `x-api-key`. `transport`, when given, carries
    every request instead of httpx's own connection pool (`max_connections`
    then does not apply). `start_timeout` and `on_wait`: see `StartWait`.
    """

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        auth: AuthHeader = "bearer",
        timeout: float = 30.0,
        max_retries: int = 6,
        backoff_base: float = 0.2,
        backoff_max: float = 10.0,
        max_connections: int = 8,
        beta: str = BETA,
        transport: httpx.AsyncBaseTransport | None = None,
        start_timeout: float | None = None,
        on_wait: Callable[[str], None] | None = None,
    ) -> None:
        base_url = base_url.rstrip("/")
        if not base_url.startswith(("http://", "https://")):
            raise ConfigError(f"the API URL {base_url!r} must start with http:// or https://")
        if auth not in ("bearer", "x-api-key"):
            raise ConfigError(f"unknown auth {auth!r}: use bearer or x-api-key")
        if not token:
            raise ConfigError("the token is empty")
        self.base_url = base_url
        self.auth = auth
        self.timeout = timeout
        self.stats = ClientStats()
        headers = {
            "anthropic-version": ANTHROPIC_VERSION,
            "anthropic-beta": beta,
            "user-agent": f"memfs/{__version__}",
            "accept": "application/json",
        }
        if auth == "bearer":
            headers["authorization"] = f"Bearer {token}"
        else:
            headers["x-api-key"] = token
        self._http = httpx.AsyncClient(
            base_url=base_url,
            headers=headers,
            timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
            limits=httpx.Limits(
                max_connections=max_connections,
                max_keepalive_connections=max_connections,
            ),
            follow_redirects=False,
            # Merged into every request's own parameters.
            params={"beta": "true"},
            transport=transport,
            verify=_tls_for(base_url),
        )
        self._send = Sender(
            self._http,
            base_url=base_url,
            timeout=timeout,
            policy=RetryPolicy(max_retries, backoff_base, backoff_max),
            stats=self.stats,
            start=None
            if start_timeout is None
            else StartWait(start_timeout, on_wait or (lambda sentence: None)),
        )

    @property
    def max_retries(self) -> int:
        return self._send.policy.max_retries

    @property
    def backoff_base(self) -> float:
        return self._send.policy.backoff_base

    @property
    def backoff_max(self) -> float:
        return self._send.policy.backoff_max

    def __repr__(self) -> str:
        return f"StoreClient(base_url={self.base_url!r}, auth={self.auth!r})"

    async def __aenter__(self) -> StoreClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool. Safe to call twice."""
        try:
            await self._http.aclose()
        except httpx.HTTPError:
            pass
