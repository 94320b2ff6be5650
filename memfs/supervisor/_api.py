"""The API from the supervisor: the stores' names and a session's stores
at a mount's start, and each check of a session follower.

The client is async (the store processes share it). The follower runs in
a trio program and uses it as it is (`api_client`); the mount's start runs
no event loop, so each of its calls is one trio run of its own, made here
and nowhere else (`call_api`).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, TypeVar

from ._credentials import Credentials

if TYPE_CHECKING:
    from ..client import StoreClient

log = logging.getLogger("memfs.supervisor")

T = TypeVar("T")


def say_waiting(sentence: str) -> None:
    """Say an attempt of a mount's start that the API did not answer."""
    log.warning("%s", sentence, extra={"event": "waiting_for_api"})


def api_client(
    creds: Credentials,
    *,
    retries: int,
    timeout: float = 30.0,
    start_timeout: float | None = None,
) -> StoreClient:
    """A client of the API `creds` name, for a trio program of the
    supervisor (a session follower's check). `start_timeout`: its first
    call is a mount's, its wait bounded and each attempt without an answer
    said."""
    from ..client import StoreClient

    return StoreClient(
        creds.api_url,
        creds.token,
        auth=creds.auth,
        max_retries=retries,
        timeout=timeout,
        start_timeout=start_timeout,
        on_wait=say_waiting,
    )


def call_api(
    creds: Credentials,
    request: Callable[[StoreClient], Awaitable[T]],
    *,
    retries: int,
    start_timeout: float | None = None,
) -> T:
    """What `request` returns, given a client of the API `creds` name, from
    code that runs no event loop; the client's errors as they are raised.
    `start_timeout`: as `api_client`."""
    import trio

    async def with_client() -> T:
        async with api_client(creds, retries=retries, start_timeout=start_timeout) as client:
            return await request(client)

    return trio.run(with_client)
