"""Reading a session's memory stores over the API (`GET /v1/sessions/{id}`),
for a mount's start (`--work-item`, `--session`) and for each check of a
session's follower.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._exceptions import MountError, StoreError
from ..api import Resource, parse_resources
from ._api import call_api
from ._credentials import Credentials

if TYPE_CHECKING:
    from ..client import StoreClient

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


async def session_state(client: StoreClient, session_id: str) -> tuple[str, list[dict[str, Any]]]:
    """The session's `status` (`running`, `idle`...) and its memory stores, as
    its resources list them (JSON objects for `parse_resources`), from one
    read; StoreError when it cannot be read."""
    session = await client.get_session(session_id)
    return session.status, [_as_resource_json(r) for r in session.memory_stores]


async def session_stores(client: StoreClient, session_id: str) -> list[dict[str, Any]]:
    """The memory stores of the session (`session_state` without the status)."""
    return (await session_state(client, session_id))[1]


def fetch_session_resources(
    creds: Credentials, session_id: str, start_timeout: float | None = None
) -> list[Resource]:
    """The session's memory stores, checked as a resources file is; MountError
    with one sentence when the session cannot be read. `start_timeout`: the
    read is a mount's first request, its wait bounded and each attempt
    without an answer said."""
    try:
        stores = call_api(
            creds,
            lambda client: session_stores(client, session_id),
            retries=3,
            start_timeout=start_timeout,
        )
    except StoreError as e:
        raise MountError(f"cannot read session {session_id} at {creds.api_url}: {e}")
    return parse_resources(stores)
