"""What every job of a sync pass works with (`Shared`, `Part`), and how jobs
run many requests at once (`each`)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

import trio

from .._exceptions import StoreError
from ..cache import SyncFace
from ._ledger import Ledger
from ._reports import SyncStatus
from ._store_api import StoreAPI

log = logging.getLogger("memfs.sync")

T = TypeVar("T")


@dataclass
class Shared:
    """What every part of a pass works with."""

    client: StoreAPI
    cache: SyncFace
    ledger: Ledger
    status: SyncStatus
    clock: Callable[[], float]


class Part:
    """One job of the sync pass (remote changes, pulls, pushes, deletes)."""

    def __init__(self, shared: Shared) -> None:
        self.client = shared.client
        self.cache = shared.cache
        self.store_id = shared.cache.store_id
        self.ledger = shared.ledger
        self.status = shared.status
        self.clock = shared.clock


async def each(items: Iterable[T], fn: Callable[[T], Awaitable[None]], limit: int) -> None:
    """`fn(item)` for every item, `limit` at once. The first whole-store failure
    (any StoreError that escapes `fn`) stops the others and is raised."""
    limiter = trio.CapacityLimiter(limit)
    failures: list[StoreError] = []

    async with trio.open_nursery() as nursery:

        async def one(item: T) -> None:
            async with limiter:
                if failures:
                    return
                try:
                    await fn(item)
                except StoreError as e:
                    failures.append(e)
                    nursery.cancel_scope.cancel()

        for item in items:
            nursery.start_soon(one, item)
    if failures:
        raise failures[0]
