"""The API from the supervisor's sync code: the stores' names and a
session's stores at a mount's start, and each check of a session follower.

The client is async (the store processes share it); these callers run no
event loop, so each call is one trio run of its own, made here and nowhere
else.
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


def call_api(
    creds: Credentials,
    request: Callable[[StoreClient], Awaitable[T]],
    *,
    retries: int,
    timeout: float = 30.0,
    start_timeout: float | None = None,
) -> T:
    """What `request` returns, given a client of the API `creds` name, from
    code that runs no event loop; the client's errors as they are raised.
    `start_timeout`: the call is a mount's first, its wait bounded and each
    attempt without an answer said."""
    import trio

    from ..client import StoreClient

    async def with_client() -> T:
        async with StoreClient(
            creds.api_url,
            creds.token,
            auth=creds.auth,
            max_retries=retries,
            timeout=timeout,
            start_timeout=start_timeout,
            on_wait=say_waiting,
        ) as client:
            return await request(client)

    return trio.run(with_client)
