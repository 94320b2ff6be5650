"""The Memory Store API over httpx: the only layer that imports httpx.

- `_client`: `StoreClient`, its headers, connection pool or transport.
- `_endpoints`: the API's endpoints, one class per resource.
- `_sessions`: the session endpoints, where a worker finds its stores.
- `_sending`: one call's attempts, the waits between them, their counts.
- `_errors`: where httpx errors and error answers become the exception tree.
"""

from __future__ import annotations

from ._client import StoreClient
from ._sending import RETRY_STATUSES, ClientStats

__all__ = [
    "ClientStats",
    "RETRY_STATUSES",
    "StoreClient",
]
