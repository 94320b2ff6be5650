"""Fixtures shared by every tier. Each engineer keeps to their own region."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support import ServerProcess

# ---- tiers and markers (tests work) ----------------------------------------

TIERS = ("unit", "contract", "inprocess", "mount", "system")
"""The folders under tests/, cheapest first: the order they run in."""
TIER_MARKS = {"contract": ("server",), "mount": ("server",), "system": ("server",)}
"""Markers every test of a tier gets: there, each test starts `memfs serve` itself
or through a fixture of its module."""
SERVER_FIXTURES = {"memfs_server", "shared_memfs_server"}
FUSE_FIXTURES = {"mounter"}


def _tier(item: pytest.Item) -> str | None:
    parts = item.path.relative_to(Path(__file__).parent).parts
    return parts[0] if len(parts) > 1 and parts[0] in TIERS else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test `server` when it starts a `memfs serve` and `fuse` when it
    mounts (by its tier, or by the fixtures it uses, however deep), then run the
    tiers cheapest first, whatever order the paths were given in."""
    for item in items:
        tier = _tier(item)
        used = set(getattr(item, "fixturenames", ()))
        marks = set(TIER_MARKS.get(tier or "", ()))
        if used & SERVER_FIXTURES:
            marks.add("server")
        if used & FUSE_FIXTURES:
            marks.add("fuse")
        for name in sorted(marks):
            if item.get_closest_marker(name) is None:
                item.add_marker(getattr(pytest.mark, name))
    rank = {tier: i for i, tier in enumerate(TIERS)}
    items.sort(key=lambda item: rank.get(_tier(item) or "", len(TIERS)))


# ---- end of tiers and markers ----------------------------------------------

# ---- memfs.testing (ops testing) ---------------------------------------------

collect_ignore = ["system/sample_project"]
"""The sample project is another project, with its own configuration and the
`memfs.testing` plugin it opts in to: tests/system/test_testing_plugin.py runs
it as its own pytest session; this suite, which does not opt in, never collects it."""

# ---- end of memfs.testing ------------------------------------------------------

# ---- cache invariants (the lead) --------------------------------------------


@pytest.fixture(autouse=True)
def cache_invariants(request, monkeypatch):
    """Every StoreCache a cache or filesystem test makes is checked for its
    invariants (tree, journal, contents, index) when it is closed and at the
    end of the test, in the manner of s3ql's fsck after each test."""
    if not (_tier(request.node) == "inprocess" or request.node.path.name == "test_cache.py"):
        yield
        return
    from memfs.cache import StoreCache
    from tests.support.invariants import invariant_problems

    caches: list[StoreCache] = []
    original_init, original_close = StoreCache.__init__, StoreCache.close

    def init(self, *args, **kwargs):
        original_init(self, *args, **kwargs)
        caches.append(self)

    def close(self):
        assert invariant_problems(self) == [], f"the cache of {self.store_id} is unsound"
        caches.remove(self)
        original_close(self)

    monkeypatch.setattr(StoreCache, "__init__", init)
    monkeypatch.setattr(StoreCache, "close", close)
    yield
    for cache in caches:
        try:
            cache.journal.db.total_changes  # noqa: B018 - a test that simulated a kill closed it
        except sqlite3.ProgrammingError:
            continue
        assert invariant_problems(cache) == [], f"the cache of {cache.store_id} is unsound"


# ---- memfs serve (server work) ------------------------------------------


@pytest.fixture
def memfs_server(tmp_path: Path) -> Iterator[ServerProcess]:
    """A fresh `memfs serve` subprocess (token `test-token`, empty database),
    stopped with SIGTERM at teardown. `.url`, `.token`, `.db_path`,
    `.restart()`, `.stop()`, `.create_store(name)`."""
    server = ServerProcess(tmp_path / "store.sqlite3").start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def shared_memfs_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServerProcess]:
    """One `memfs serve` for a whole test module: cheaper, for tests that only
    need a store of their own (make one with `make_store`). Do not stop it."""
    server = ServerProcess(tmp_path_factory.mktemp("serve") / "store.sqlite3").start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def make_store(memfs_server: ServerProcess) -> Callable[..., dict]:
    """`make_store(name="test store", **fields)` creates a store on
    `memfs_server` over HTTP and returns its JSON (`["id"]` is the store id)."""
    return memfs_server.create_store


# ---- end of memfs serve fixtures ------------------------------------------


# ---- StoreClient (client work) ---------------------------------------------


@pytest.fixture
async def store_client(shared_memfs_server: ServerProcess):
    """A StoreClient on `shared_memfs_server`, with short backoffs."""
    from memfs.client import StoreClient

    async with StoreClient(
        shared_memfs_server.url, shared_memfs_server.token, backoff_base=0.01, backoff_max=0.05
    ) as client:
        yield client


@pytest.fixture
async def store_id(store_client) -> str:
    """The id of a fresh, empty store on `shared_memfs_server`; `store_client`'s
    stats are reset after creating it."""
    store = await store_client.create_store("contract test")
    store_client.stats.reset()
    return store.id


# ---- end of StoreClient fixtures -------------------------------------------


# ---- real mounts (mount work) ------------------------------------------------


@pytest.fixture
def mounter(memfs_server: ServerProcess, tmp_path: Path):
    """A `tests.support.mounts.Mounter` on a fresh `memfs serve`: `.mount_one(store_id)`
    mounts with `memfs mount --daemon`; everything is unmounted at teardown."""
    from tests.support.mounts import Mounter

    m = Mounter(memfs_server, tmp_path)
    try:
        yield m
    finally:
        m.cleanup()


@pytest.fixture
def mounted(mounter, memfs_server: ServerProcess):
    """A fresh read-write store mounted at `mounter.root / "s"`: yields (store_id, Path)."""
    store_id = memfs_server.create_store("mounted store")["id"]
    path = mounter.mount_one(store_id)
    return store_id, path


# ---- end of real mount fixtures ----------------------------------------------
