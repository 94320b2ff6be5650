"""`StoreClient`: the only way memfs talks to a store, under trio. Its
promises (headers, one bounded pool, retries, `stats`, a `StoreError` for
every failure, a token never logged nor shown) are docs/client.md's.
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
    """An http:// API sets up no TLS (a mount's start does not load the CA
    bundle): its context trusts no CA at all; https:// gets httpx's default."""
    if base_url.lower().startswith("http://"):
        return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    return True


class StoreClient(StoreEndpoints, MemoryEndpoints, VersionEndpoints, SessionEndpoints):
    """`async with StoreClient(url, token) as c:`, or `aclose()` when done.
    `auth`: the token travels as `Authorization: Bearer` or `x-api-key`."""

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

    def __repr__(self) -> str:
        return f"StoreClient(base_url={self.base_url!r}, auth={self.auth!r})"

    async def __aenter__(self) -> StoreClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Safe to call twice."""
        try:
            await self._http.aclose()
        except httpx.HTTPError:
            pass
