"""A seeded soak of the sync engine in one process: local changes (writes,
renames, renames over other files, deletes) made through the cache's own API,
also while a pass is on the wire, against the real server app behind a
transport that answers 429/5xx/529 and loses answers after the store applied
the request. After every step the cache must be sound; at the end, with the
faults gone and a final sync, the store holds exactly what was written here,
and no conflict copy was made (there was no other writer).

Each seed is one deterministic workload (but for real time in the server's
stamps). This soak found: a push whose file took another memory while it was
on the wire re-bound the file to the old memory; a delete taken back while it
was on the wire lost the file's content to a 404; a push sent a stale
snapshot of a file renamed over another since the pass began.
`make soak` runs many seeds (MEMFS_SOAK_SEEDS).
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import httpx
import pytest
import trio

from memfs._exceptions import MemfsError, SyncError
from memfs.cache import ROOT_ID, StoreCache
from memfs.sync import SyncEngine
from tests.support import conflict_files
from tests.support.inprocess import Answer, InProcessStore, LoseAnswer, ScriptedTransport
from tests.support.invariants import invariant_problems

SEEDS = int(os.environ.get("MEMFS_SOAK_SEEDS", "12"))
STEPS = 200


class RandomFaults(ScriptedTransport):
    """A fault for about one request in five while `on`."""

    def __init__(self, store: InProcessStore, rng: random.Random) -> None:
        super().__init__(store.app)
        self.rng = rng
        self.on = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if self.on and not self.faults:
            x = self.rng.random()
            if x < 0.1:
                self.faults.append(Answer(self.rng.choice([429, 500, 529])))
            elif x < 0.2:
                self.faults.append(LoseAnswer())
        return await super().handle_async_request(request)


class Workload:
    """Local changes through the cache, and the model of what they leave."""

    def __init__(self, cache: StoreCache, rng: random.Random) -> None:
        self.cache = cache
        self.rng = rng
        self.model: dict[str, str] = {}

    def path(self) -> str:
        return f"/d{self.rng.randrange(2)}/n{self.rng.randrange(4)}"

    def folder(self, path: str) -> int:
        if path.count("/") == 1:
            return ROOT_ID
        name = path.split("/")[1]
        kids = self.cache.children[ROOT_ID]
        return kids[name] if name in kids else self.cache.mkdir(ROOT_ID, name, 0o755).id

    async def write(self, path: str, text: str) -> None:
        parent, name = self.folder(path), path.rsplit("/", 1)[1]
        kids = self.cache.children[parent]
        node_id = kids[name] if name in kids else self.cache.create(parent, name, 0o644).id
        node = await self.cache.open(node_id, truncate=True, writable=True)
        self.cache.write(node, 0, text.encode())
        self.cache.release(node_id, writable=True)
        self.model[path] = text

    async def step(self, label: str) -> None:
        path, x = self.path(), self.rng.random()
        node = self.cache.find(path)
        try:
            if x < 0.55 or node is None:
                await self.write(path, f"{label} at {path}")
            elif x < 0.8:
                target = self.path()
                self.cache.rename(node.parent, node.name, self.folder(target), target[4:])
                self.model[target] = self.model.pop(path)
            else:
                self.cache.unlink(node.parent, node.name)
                del self.model[path]
        except MemfsError:
            pass  # a refusal the model does not make (a rename onto itself is fine)


async def soak(seed: int, folder: Path) -> None:
    rng = random.Random(seed)
    store = InProcessStore(folder)
    faults = RandomFaults(store, random.Random(seed * 7 + 1))
    store.transport = faults
    client = store.client(max_retries=2)
    clock = [1_000_000.0]
    try:
        store_id = (await client.create_store("soak")).id
        cache = StoreCache(str(folder / "cache"), store_id)
        engine = SyncEngine(client, cache, clock=lambda: clock[0])
        cache.source = engine.fetch_content
        work = Workload(cache, rng)
        await work.write("/keep", "never deleted: deleting everything would be a wipe")
        faults.on = True
        for i in range(STEPS):
            if rng.random() < 0.6:
                await work.step(f"step {i}")
            else:

                async def one_pass() -> None:
                    try:
                        await engine.run_pass()
                    except SyncError:
                        pass

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(one_pass)
                    for k in range(rng.randrange(5)):
                        await trio.sleep(0)  # the pass is on the wire meanwhile
                        await work.step(f"step {i}.{k}")
                clock[0] += rng.choice([5, 31])
            assert invariant_problems(cache) == [], (seed, i)
        faults.on = False
        for _ in range(6):
            await engine.run_pass(final=True)
        stored = {}
        async for m in client.iter_memories(store_id, view="full", limit=20):
            stored[m.path] = m.content
        assert stored == work.model, seed
        assert conflict_files(cache.conflicts.dir) == [], seed
        cache.close()
    finally:
        await client.aclose()
        store.close()


@pytest.mark.parametrize("seed", range(SEEDS))
async def test_local_changes_against_a_faulty_store_converge(seed, tmp_path):
    await soak(seed, tmp_path)
