"""What the sync talks to: the store (the part of `memfs.client.StoreClient` it
uses, as a protocol), what the store holds of one memory, how a failure is
told apart (one memory's, or the whole store's), and the kernel's cache,
which a pull tells what to forget."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from .._exceptions import StatusError, StoreError
from ..api import Memory, MemoryPrefix, MemoryVersion, Page


class StoreAPI(Protocol):
    """The part of `memfs.client.StoreClient` the sync uses."""

    stats: Any

    async def get_memory(self, store_id: str, memory_id: str, *, view: str = ...) -> Memory: ...
    async def list_memories_page(
        self,
        store_id: str,
        *,
        path_prefix: str | None = ...,
        depth: int | None = ...,
        view: str | None = ...,
        limit: int | None = ...,
        page: str | None = ...,
    ) -> Page[Memory | MemoryPrefix]: ...
    async def list_versions_page(
        self,
        store_id: str,
        *,
        created_at_gte: str | None = ...,
        limit: int | None = ...,
        page: str | None = ...,
    ) -> Page[MemoryVersion]: ...
    async def create_memory(self, store_id: str, path: str, content: str) -> Memory: ...
    async def update_memory(
        self,
        store_id: str,
        memory_id: str,
        *,
        content: str | None = ...,
        path: str | None = ...,
        precondition_sha256: str | None = ...,
    ) -> Memory: ...
    async def delete_memory(
        self, store_id: str, memory_id: str, *, expected_content_sha256: str | None = ...
    ) -> None: ...


class KernelNotifier(Protocol):
    async def forget_content(self, inode: int) -> None: ...
    async def forget_entry(self, parent_inode: int, name: str) -> None: ...


class NoKernel:
    """The notifier while nothing is mounted: there is no kernel cache to clear."""

    async def forget_content(self, inode: int) -> None:
        return None

    async def forget_entry(self, parent_inode: int, name: str) -> None:
        return None


def whole_store(e: StoreError) -> bool:
    """Whether a failure concerns the store as a whole (end the pass, back off)
    rather than the one memory it was about."""
    if not isinstance(e, StatusError):
        return True
    return e.status in (401, 408, 429) or e.status >= 500


@dataclass(slots=True)
class RemoteMemory:
    """What the store holds for one memory; `deleted` when it holds nothing."""

    memory_id: str
    path: str | None = None
    sha: str | None = None
    size: int = 0
    deleted: bool = False

    @classmethod
    def of(cls, m: Memory) -> RemoteMemory:
        """What the store's answer `m` says it holds."""
        return cls(m.id, m.path, m.content_sha256, m.content_size_bytes)
