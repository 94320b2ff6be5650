"""Reading a session's memory stores over the API (`GET /v1/sessions/{id}`),
for a mount's start (`--work-item`, `--session`) and for each check of a
session's follower.
"""

from __future__ import annotations

from typing import Any

from .._exceptions import MountError, StoreError
from ..api import Resource, parse_resources
from ._credentials import Credentials
from ._specs import say_waiting

CHECK_TIMEOUT = 15.0
CHECK_RETRIES = 2
"""A follower's check: seconds an attempt may take, and its retries."""


def _as_resource_json(r: Any) -> dict[str, Any]:
    """A session's store (`memfs.api.SessionResource`) as `parse_resources` reads it."""
    return {
        "type": "memory_store",
        "memory_store_id": r.memory_store_id,
        "access": r.access,
        "name": r.name,
        "description": r.description,
        "mount_path": r.mount_path,
    }


async def _session_stores(
    creds: Credentials,
    session_id: str,
    *,
    retries: int,
    timeout: float,
    start_timeout: float | None,
) -> tuple[str, list[dict[str, Any]]]:
    from ..client import StoreClient

    async with StoreClient(
        creds.api_url,
        creds.token,
        auth=creds.auth,
        max_retries=retries,
        timeout=timeout,
        start_timeout=start_timeout,
        on_wait=say_waiting,
    ) as client:
        session = await client.get_session(session_id)
    return session.status, [_as_resource_json(r) for r in session.memory_stores]


def read_session_state(
    creds: Credentials,
    session_id: str,
    *,
    retries: int = 3,
    timeout: float = 30.0,
    start_timeout: float | None = None,
) -> tuple[str, list[dict[str, Any]]]:
    """The session's `status` (`running`, `idle`...) and its memory stores
    (as `read_session_stores` has them), from one read; StoreError when it
    cannot be read."""
    import trio

    return trio.run(
        lambda: _session_stores(
            creds, session_id, retries=retries, timeout=timeout, start_timeout=start_timeout
        )
    )


def read_session_stores(
    creds: Credentials,
    session_id: str,
    *,
    retries: int = 3,
    timeout: float = 30.0,
    start_timeout: float | None = None,
) -> list[dict[str, Any]]:
    """The memory stores of the session, as its resources list them (JSON
    objects for `parse_resources`); StoreError when it cannot be read.
    `start_timeout`: the read is a mount's first request, its wait bounded
    and each attempt without an answer said."""
    return read_session_state(
        creds, session_id, retries=retries, timeout=timeout, start_timeout=start_timeout
    )[1]


def fetch_session_resources(
    creds: Credentials, session_id: str, start_timeout: float | None = None
) -> list[Resource]:
    """The session's memory stores, checked as a resources file is; MountError
    with one sentence when the session cannot be read. `start_timeout`: as
    `read_session_stores`."""
    try:
        stores = read_session_stores(creds, session_id, start_timeout=start_timeout)
    except StoreError as e:
        raise MountError(f"cannot read session {session_id} at {creds.api_url}: {e}")
    return parse_resources(stores)
