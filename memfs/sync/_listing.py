"""A whole store's listing (basic view), read by top-level folder in parallel.

A listing is a chain of pages: each cursor comes with the page before, so a
store of 2,000 memories costs 20 round trips one after the other. Read by
folder, it costs about two: the first page of the whole store (a store it
holds costs that one request, as before), then the root at depth 1 (which
names the top-level folders and holds the root's own memories), then every
folder's subtree at once (`concurrency` at a time). A store with one
folder, or with more than `MAX_PREFIX_LISTINGS` of them (as many requests as
folders: more than a chain would cost), goes on page after page from the
first page's cursor; so does a store that refuses one folder's listing
(any answer but a whole-store failure).

Nothing here relies on the store's order: a memory listed twice with
different states (moved or changed between two folders' pages) is one the
caller asks about by id (`doubtful`), as it asks about a known memory that no
page showed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .._exceptions import StoreError
from ..api import Memory, MemoryPrefix
from ._part import each
from ._store_api import RemoteMemory, StoreAPI, whole_store

LISTING_PAGE = 100
"""Memories per page of a basic listing (the API's maximum)."""
MAX_PREFIX_LISTINGS = 64
"""Above this many top-level folders, the listing stays one chain of pages."""


@dataclass
class Listing:
    """What a whole listing found: memory id -> what the store holds, and the
    ids listed twice with different states (to ask the store about, by id).

    Each page's memories are kept only as what the sync reads of them, so that
    the pages themselves go as soon as they are read: a store process is not
    left as large as a whole store's wire objects at once."""

    memories: dict[str, RemoteMemory] = field(default_factory=dict)
    doubtful: set[str] = field(default_factory=set)

    def add(self, item: Memory) -> None:
        seen = self.memories.get(item.id)
        if seen is None:
            self.memories[item.id] = RemoteMemory.of(item)
        elif (seen.path, seen.sha) != (item.path, item.content_sha256):
            self.doubtful.add(item.id)


async def list_whole_store(client: StoreAPI, store_id: str, concurrency: int) -> Listing:
    """Every memory of the store in the basic view (see the module's docstring)."""
    out = Listing()
    first = await client.list_memories_page(store_id, view="basic", limit=LISTING_PAGE)
    for item in first.data:
        if isinstance(item, Memory):
            out.add(item)
    if not first.next_page:
        return out
    folders: list[str] = []
    await _chain(client, store_id, out, folders=folders, path_prefix="/", depth=1)
    if len(folders) < 2 or len(folders) > MAX_PREFIX_LISTINGS:
        await _chain(client, store_id, out, page=first.next_page)
        return out
    try:
        await each(
            folders, lambda prefix: _chain(client, store_id, out, path_prefix=prefix), concurrency
        )
    except StoreError as e:
        if whole_store(e):
            raise
        # The store refused one folder's listing: the whole store, page after page.
        await _chain(client, store_id, out, page=first.next_page)
    return out


async def _chain(
    client: StoreAPI,
    store_id: str,
    out: Listing,
    *,
    folders: list[str] | None = None,
    path_prefix: str | None = None,
    depth: int | None = None,
    page: str | None = None,
) -> None:
    """One chain of pages from `page` on (None: the first) into `out`; the
    subfolders a depth-1 listing names go to `folders`."""
    while True:
        got = await client.list_memories_page(
            store_id,
            path_prefix=path_prefix,
            depth=depth,
            view="basic",
            limit=LISTING_PAGE,
            page=page,
        )
        for item in got.data:
            if isinstance(item, MemoryPrefix):
                if folders is not None:
                    folders.append(item.path)
            else:
                out.add(item)
        page = got.next_page
        if not page:
            return
