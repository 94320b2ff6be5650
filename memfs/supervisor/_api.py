"""The API from the supervisor: a client for a trio program (a session
follower's check), one call from code that runs no event loop (a mount's
start), and a session's memory stores."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, TypeVar

from .._exceptions import MountError, StoreError
from ..api import Resource, parse_resources
from ._credentials import Credentials

if TYPE_CHECKING:
    from ..client import StoreClient

log = logging.getLogger("memfs.supervisor")

T = TypeVar("T")


def _say_waiting(sentence: str) -> None:
    log.warning("%s", sentence, extra={"event": "waiting_for_api"})


def api_client(
    creds: Credentials, *, retries: int, timeout: float = 30.0, start_timeout: float | None = None
) -> StoreClient:
    """A client of the API `creds` name. `start_timeout`: its first call is a
    mount's, its wait bounded and each attempt without an answer said."""
    from ..client import StoreClient

    return StoreClient(
        creds.api_url,
        creds.token,
        auth=creds.auth,
        max_retries=retries,
        timeout=timeout,
        start_timeout=start_timeout,
        on_wait=_say_waiting,
    )


def call_api(
    creds: Credentials,
    request: Callable[[StoreClient], Awaitable[T]],
    start_timeout: float | None,
) -> T:
    """What `request` returns, from code that runs no event loop (one trio
    run); the client's errors as they are raised."""
    import trio

    async def with_client() -> T:
        async with api_client(creds, retries=3, start_timeout=start_timeout) as client:
            return await request(client)

    return trio.run(with_client)


async def session_state(client: StoreClient, session_id: str) -> tuple[str, list[dict[str, Any]]]:
    """The session's `status` and its memory stores as JSON objects for
    `parse_resources`, from one read; StoreError when it cannot be read."""
    session = await client.get_session(session_id)
    return session.status, [asdict(r) for r in session.memory_stores]


def fetch_session_resources(
    creds: Credentials, session_id: str, start_timeout: float | None = None
) -> list[Resource]:
    """The session's memory stores, checked as a resources file is; MountError
    with one sentence when the session cannot be read."""
    try:
        _, stores = call_api(creds, lambda client: session_state(client, session_id), start_timeout)
    except StoreError as e:
        raise MountError(f"cannot read session {session_id} at {creds.api_url}: {e}")
    return parse_resources(stores)
