"""How fast `memfs serve` answers StoreClient on loopback.

Starts its own `memfs serve` on a temporary SQLite file, then measures
creates/s, updates/s, gets/s and list pages/s (pages of 100, basic view, over
a store of 2,000 memories) with 1 and 8 concurrent tasks sharing one client.
Prints a table and writes JSON to bench/results/server_bench-<time>.json.

    .venv/bin/python bench/server_bench.py [--memories 2000] [--ops 400]

Every loop is bounded in count; the server is stopped at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio

from memfs.client import StoreClient

RESULTS = Path(__file__).resolve().parent / "results"


def start_server(db: str, token: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "memfs", "serve", "--db", db, "--port", "0", "--token", token],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    if not url.startswith("http"):
        proc.kill()
        raise SystemExit(f"memfs serve did not start (first line {url!r})")
    return proc, url


async def run_tasks(concurrency: int, count: int, op) -> float:
    """Run op(i) for i in range(count) on `concurrency` tasks; ops per second."""
    next_index = 0

    async def worker() -> None:
        nonlocal next_index
        while next_index < count:
            i = next_index
            next_index += 1
            await op(i)

    started = time.perf_counter()
    async with trio.open_nursery() as nursery:
        for _ in range(concurrency):
            nursery.start_soon(worker)
    return count / (time.perf_counter() - started)


async def bench(url: str, token: str, memories: int, ops: int, levels: list[int]) -> dict:
    results: dict[str, dict[str, float]] = {}
    async with StoreClient(url, token, max_connections=max(levels)) as client:
        big = await client.create_store("bench-big")
        filler = "x" * 200

        async def fill(i: int) -> None:
            await client.create_memory(big.id, f"/d{i % 20:02d}/m{i:05d}.md", filler, view="basic")

        started = time.perf_counter()
        await run_tasks(8, memories, fill)
        fill_seconds = time.perf_counter() - started

        listing = await client.list_memories_page(big.id, limit=100)
        ids = [m.id for m in listing.data]

        for level in levels:
            row: dict[str, float] = {}
            store = await client.create_store(f"bench-{level}")
            created: list[str] = []

            async def create(i: int, store_id: str = store.id, created=created) -> None:
                m = await client.create_memory(
                    store_id, f"/c/{i:05d}.md", "hello " * 20, view="basic"
                )
                created.append(m.id)

            row["creates/s"] = await run_tasks(level, ops, create)

            async def update(i: int, store_id: str = store.id, created=created) -> None:
                await client.update_memory(
                    store_id, created[i % len(created)], content=f"update {i} " * 20, view="basic"
                )

            row["updates/s"] = await run_tasks(level, ops, update)

            async def get(i: int) -> None:
                await client.get_memory(big.id, ids[i % len(ids)])

            row["gets/s"] = await run_tasks(level, ops, get)

            pages_per_listing = -(-memories // 100)
            listings = max(2, ops // (pages_per_listing * 4))

            async def list_all(i: int) -> None:
                seen = 0
                async for _ in client.iter_memories(big.id, limit=100):
                    seen += 1
                assert seen == memories, seen

            row["list pages/s"] = (await run_tasks(level, listings, list_all)) * pages_per_listing
            results[str(level)] = row
        stats = {
            "requests": client.stats.requests,
            "retries": client.stats.retries,
            "fill_seconds": round(fill_seconds, 2),
        }
    return {"levels": results, "client": stats}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=2000, help="memories in the listed store")
    parser.add_argument("--ops", type=int, default=400, help="operations per measurement")
    parser.add_argument("--levels", default="1,8", help="concurrency levels, comma-separated")
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    token = secrets.token_urlsafe(16)
    with tempfile.TemporaryDirectory(prefix="memfs-bench-") as tmp:
        proc, url = start_server(os.path.join(tmp, "bench.sqlite3"), token)
        try:
            result = trio.run(bench, url, token, args.memories, args.ops, levels)
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
    columns = ["creates/s", "updates/s", "gets/s", "list pages/s"]
    print(f"memfs serve on loopback, {args.memories} memories, {args.ops} ops per cell")
    print(f"{'tasks':>5}  " + "  ".join(f"{c:>12}" for c in columns))
    for level, row in result["levels"].items():
        print(f"{level:>5}  " + "  ".join(f"{row[c]:12.0f}" for c in columns))
    print(
        f"client: {result['client']['requests']} requests, {result['client']['retries']} retries;"
        f" filling {args.memories} memories took {result['client']['fill_seconds']} s"
    )
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"server_bench-{time.strftime('%Y%m%dT%H%M%S')}.json"
    result.update(
        {
            "memories": args.memories,
            "ops": args.ops,
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
        }
    )
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out.relative_to(Path.cwd()) if out.is_relative_to(Path.cwd()) else out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
