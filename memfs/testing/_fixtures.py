"""The fixtures of the `memfs.testing` pytest plugin (docs/testing.md): synchronous, so that async
tests can use them too, and each for one test."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest

from ._processes import FakeStore, FaultProxyProcess, ServerProcess

FAULT_SEED = 0
"""So a `*_rate` fault hits the same requests on every run of a test."""

MakeMemoryStore = Callable[..., FakeStore]


@pytest.fixture
def memfs_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """A `memfs serve` on 127.0.0.1 and a free port, with a fresh SQLite
    database and a random token: a `ServerProcess`."""
    folder: Path = tmp_path_factory.mktemp("memfs-serve")
    server = ServerProcess(folder / "store.sqlite3").start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def make_memory_store(memfs_server: ServerProcess) -> MakeMemoryStore:
    """`make_memory_store(name="test store", memories=None)`: a new store on
    `memfs_server`, seeded with `memories` (`{path: content}`), as a `FakeStore`."""

    def make(name: str = "test store", memories: Mapping[str, str] | None = None) -> FakeStore:
        store = FakeStore(memfs_server, memfs_server.create_store(name)["id"])
        if memories:
            store.seed(memories)
        return store

    return make


@pytest.fixture
def memory_store(make_memory_store: MakeMemoryStore) -> FakeStore:
    """A fresh, empty store on `memfs_server`: a `FakeStore`."""
    return make_memory_store()


@pytest.fixture
def fault_proxy(memfs_server: ServerProcess) -> Iterator[FaultProxyProcess]:
    """A fault proxy in front of `memfs_server`, passing everything on until
    told otherwise: a `FaultProxyProcess`."""
    proxy = FaultProxyProcess(memfs_server.url, seed=FAULT_SEED).start()
    try:
        yield proxy
    finally:
        proxy.stop()
