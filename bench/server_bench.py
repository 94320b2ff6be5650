"""How fast `memfs serve` answers StoreClient on loopback.

Starts its own `memfs serve` on a temporary SQLite file, then measures
creates/s, updates/s, gets/s and list pages/s (pages of 100, basic view, over
a store of 2,000 memories) with 1 and 8 concurrent clients. Prints a table and
writes JSON to bench/results/server_bench-<time>.json.

    .venv/bin/python bench/server_bench.py [--memories 2000] [--ops 1000]
        [--levels 1,8] [--client-procs 1] [--server-args "--workers 2"]

What it measures is what it prints:

- Each client is its own `StoreClient` with one connection, as each sandbox
  of a fleet has its own; the 8 clients are 8 concurrent keep-alive
  connections. Every client opens its connection before the clock starts,
  and all of them start at one barrier.
- The clients run in `--client-procs` processes (default 1) apart from this
  one and from the server; a cell's rate is every operation of every client
  over the time from the first start to the last end. The CPU the clients and
  the server used during the cell is printed beside it (100% = one core): on
  two cores a client at 100% is the bottleneck, not the server.
- Every answer is checked (the path and sha of each create, the sha of each
  update, the id and content of each get, the count and order of each
  listing), and so is the store after each write cell: exactly the memories
  created, each holding the last content written. A wrong answer, a retried
  request or a failed check fails the run (exit status 1).

Every loop is bounded in count; the server and the clients are stopped at the end.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import os
import platform
import secrets
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from memfs.client import StoreClient

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _server_clients import CLIENTS, BenchFailure  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
COLUMNS = ["creates/s", "updates/s", "gets/s", "list pages/s"]
TICKS = os.sysconf("SC_CLK_TCK")


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def fill_content(i: int) -> str:
    return f"memory {i}\n" + "x" * 200


def create_content(i: int) -> str:
    return f"created {i} " * 20


def update_content(i: int) -> str:
    return f"update {i} " * 20


def start_server(command: list[str], db: str, token: str) -> tuple[subprocess.Popen[str], str]:
    """The server, its token in MEMFS_SERVE_TOKEN (never on its command line)."""
    proc = subprocess.Popen(
        [*command, "--db", db, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "MEMFS_SERVE_TOKEN": token},
    )
    assert proc.stdout is not None
    url = proc.stdout.readline().strip()
    if not url.startswith("http"):
        proc.kill()
        raise SystemExit(f"memfs serve did not start (first line {url!r})")
    return proc, url


def process_cpu(pids: list[int]) -> float:
    """CPU seconds (user + system) the processes and their reaped children used."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        total += sum(int(x) for x in fields[11:15])
    return total / TICKS


def server_pids(proc: subprocess.Popen[str]) -> list[int]:
    """The server and its worker processes, when it runs several."""
    try:
        with open(f"/proc/{proc.pid}/task/{proc.pid}/children") as f:
            children = [int(x) for x in f.read().split()]
    except OSError:
        children = []
    return [proc.pid, *children]


# ---- one cell, in a client process ----------------------------------------------


async def _client_cell(job: dict[str, Any], start_at: float) -> dict[str, Any]:
    """Run this process's share of one cell: `job["clients"]` clients, each
    with its own connection, each doing every op whose index it owns."""
    op, clients, first, stride = job["op"], job["clients"], job["first"], job["stride"]
    count, args = job["count"], job["args"]
    results: dict[str, Any] = {"retries": 0, "starts": [], "ends": [], "out": {}}

    async def one_client(k: int, ready: trio.Event, go: trio.Event) -> None:
        index = first + k
        async with CLIENTS[job["client"]](job["url"], job["token"]) as c:
            await c.get_store(args["store"])  # opens the connection before the clock
            ready.set()
            await go.wait()
            results["starts"].append(time.perf_counter())
            for i in range(index, count, stride):
                results["out"][i] = await OPS[op](c, args, i)
            results["ends"].append(time.perf_counter())
            results["retries"] += c.retries

    readies = [trio.Event() for _ in range(clients)]
    go = trio.Event()
    async with trio.open_nursery() as nursery:
        for k in range(clients):
            nursery.start_soon(one_client, k, readies[k], go)
        for ready in readies:
            await ready.wait()
        await trio.sleep(max(0.0, start_at - time.perf_counter()))
        go.set()
    return results


def client_cell(job: dict[str, Any], start_at: float) -> dict[str, Any]:
    cpu = time.process_time()
    try:
        results = trio.run(_client_cell, job, start_at)
    except BaseExceptionGroup as group:
        failures, _ = group.split(BenchFailure)
        if failures is None:
            raise
        while isinstance(failures, BaseExceptionGroup):
            failures = failures.exceptions[0]
        raise failures from None
    results["cpu"] = time.process_time() - cpu
    return results


async def op_create(c: Any, args: dict[str, Any], i: int) -> str:
    path, content = f"/c/{i:05d}.md", create_content(i)
    m = await c.create(args["store"], path, content)
    if m["path"] != path or m["content_sha256"] != sha(content) or m["content"] is not None:
        raise BenchFailure(f"create {i} answered {m}")
    return str(m["id"])


async def op_update(c: Any, args: dict[str, Any], i: int) -> str:
    ids = args["ids"]
    content = update_content(i)
    m = await c.update(args["store"], ids[i % len(ids)], content)
    if m["id"] != ids[i % len(ids)] or m["content_sha256"] != sha(content):
        raise BenchFailure(f"update {i} answered {m}")
    return str(m["memory_version_id"])


async def op_get(c: Any, args: dict[str, Any], i: int) -> None:
    n = i % len(args["ids"])
    m = await c.get(args["store"], args["ids"][n])
    if m["id"] != args["ids"][n] or m["content"] != fill_content(n):
        raise BenchFailure(f"get of memory {n} answered {m}")


async def op_list(c: Any, args: dict[str, Any], i: int) -> None:
    paths = await c.paths(args["store"])
    if paths != args["paths"]:
        raise BenchFailure(f"listing {i} saw {len(paths)} memories, not {len(args['paths'])}")


OPS: dict[str, Callable[..., Any]] = {
    "create": op_create,
    "update": op_update,
    "get": op_get,
    "list": op_list,
}


# ---- the profile ------------------------------------------------------------------

# Where a sample's time goes: a socket system call is "socket I/O"; else the
# innermost frame of one of the parts below names it, so trio, the standard
# library and the interpreter count for whichever part called them (py-spy
# --native: the C frames of SQLite and of the json module count as theirs).
# A sample in none of them is trio's own scheduling.
SPLIT = [
    ("SQLite", ("sqlite3", "_sqlite/", "(libsqlite3")),
    ("JSON", ("json/", "_json.c", "orjson")),
    (
        "HTTP/1.1: uvicorn, httptools, _connections",
        ("uvicorn/", "httptools/", "uvloop/", "hypercorn/", "h11/", "memfs/server/_connections"),
    ),
    ("Starlette", ("starlette/", "anyio/")),
    ("memfs serve", ("memfs/server/",)),
]
SOCKET_CALLS = ("sock_send", "sock_recv", "sock_call", "sock_accept", "epoll_ctl")


def start_profiler(pid: int) -> tuple[subprocess.Popen[bytes], Path]:
    py_spy = Path(sys.executable).parent / "py-spy"
    if not py_spy.exists():
        raise SystemExit("server_bench: --profile needs py-spy (.venv/bin/pip install py-spy)")
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"server-{time.strftime('%Y%m%dT%H%M%S')}.txt"
    cmd = [str(py_spy), "record", "-p", str(pid), "-f", "raw", "-r", "250", "--native"]
    proc = subprocess.Popen(
        [*cmd, "--idle", "-o", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    time.sleep(1)
    return proc, out


def stop_profiler(proc: subprocess.Popen[bytes], out: Path) -> dict[str, float]:
    """Stop py-spy; the share of the busy samples each part of SPLIT took."""
    proc.send_signal(signal.SIGINT)
    proc.wait(60)
    shares: dict[str, float] = {name: 0 for name, _ in SPLIT}
    shares["socket I/O"] = shares["trio scheduling"] = shares["idle"] = 0
    for line in out.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        frames = stack.split(";")
        shares[classify(frames)] += int(count)
    idle = shares.pop("idle")
    busy = sum(shares.values()) or 1
    return {"idle_samples": idle, **{k: round(v / busy, 3) for k, v in shares.items()}}


def classify(frames: list[str]) -> str:
    leaf = frames[-1]
    if leaf.startswith("epoll_wait") or leaf.startswith("get_events (trio/"):
        return "idle"
    if any(frame.startswith(SOCKET_CALLS) for frame in frames[-4:]):
        return "socket I/O"
    for frame in reversed(frames):
        for name, marks in SPLIT:
            if any(mark in frame for mark in marks):
                return name
    return "trio scheduling"


# ---- the parent: setup, cells, checks --------------------------------------------


class Bench:
    def __init__(
        self,
        args: argparse.Namespace,
        url: str,
        token: str,
        server: subprocess.Popen[str],
        pool: Any,
    ) -> None:
        self.url, self.token, self.server, self.pool = url, token, server, pool
        self.procs, self.client = args.client_procs, args.client

    def cell(self, op: str, clients: int, count: int, args: dict[str, Any]) -> dict[str, Any]:
        """Run `count` ops on `clients` clients spread over the client processes."""
        procs = min(self.procs, clients)
        shares = [clients // procs + (1 if p < clients % procs else 0) for p in range(procs)]
        jobs, first = [], 0
        for share in shares:
            jobs.append(
                {
                    "op": op,
                    "clients": share,
                    "first": first,
                    "stride": clients,
                    "count": count,
                    "args": args,
                    "url": self.url,
                    "token": self.token,
                    "client": self.client,
                }
            )
            first += share
        # Time for every process to open its connections, then one start for all.
        start_at = time.perf_counter() + 0.5 + 0.05 * clients
        pids = server_pids(self.server)
        server_cpu = process_cpu(pids)
        pending = [self.pool.apply_async(client_cell, (job, start_at)) for job in jobs]
        parts = [p.get(timeout=600) for p in pending]
        server_cpu = process_cpu(pids) - server_cpu
        start = min(min(p["starts"]) for p in parts)
        end = max(max(p["ends"]) for p in parts)
        seconds = end - start
        out: dict[int, Any] = {}
        for p in parts:
            out.update(p["out"])
        if sorted(out) != list(range(count)):
            raise BenchFailure(f"{op}: {len(out)} of {count} ops answered")
        retries = sum(p["retries"] for p in parts)
        if retries:
            raise BenchFailure(f"{op} with {clients} clients retried {retries} requests")
        # The server's CPU also counts the moments before the start; a cell of
        # a second or more keeps that small.
        return {
            "rate": count / seconds,
            "seconds": seconds,
            "client_cpu": sum(p["cpu"] for p in parts) / seconds,
            "server_cpu": server_cpu / seconds,
            "out": [out[i] for i in range(count)],
        }


def check_store(url: str, token: str, store: str, expected: dict[str, str]) -> None:
    """The store holds exactly the paths of `expected`, each with that content."""

    async def check() -> None:
        async with StoreClient(url, token) as c:
            seen = {}
            async for item in c.iter_memories(store, limit=100):
                m = await c.get_memory(store, item.id)
                seen[m.path] = m.content
        if seen != expected:
            wrong = sorted(p for p in set(seen) | set(expected) if seen.get(p) != expected.get(p))
            raise BenchFailure(f"store {store}: {len(wrong)} paths differ, first {wrong[:3]}")

    trio.run(check)


async def setup(url: str, token: str, memories: int, levels: list[int]) -> dict[str, Any]:
    async with StoreClient(url, token, max_connections=8) as client:
        big = await client.create_store("bench-big")
        ids: list[str] = [""] * memories
        paths = [f"/d{i % 20:02d}/m{i:05d}.md" for i in range(memories)]

        async def fill(first: int) -> None:
            for i in range(first, memories, 8):
                m = await client.create_memory(big.id, paths[i], fill_content(i), view="basic")
                ids[i] = m.id

        async with trio.open_nursery() as nursery:
            for first in range(8):
                nursery.start_soon(fill, first)
        stores = {level: (await client.create_store(f"bench-{level}")).id for level in levels}
    return {"big": big.id, "ids": ids, "paths": sorted(paths), "stores": stores}


def run(args: argparse.Namespace, url: str, token: str, server: subprocess.Popen[str]) -> dict:
    levels = [int(x) for x in args.levels.split(",")]
    started = time.perf_counter()
    data = trio.run(setup, url, token, args.memories, levels)
    fill_seconds = time.perf_counter() - started
    pages_per_listing = -(-args.memories // 100)
    base_listings = max(2, args.ops // (pages_per_listing * 4))
    results: dict[str, Any] = {}
    profiler = start_profiler(server.pid) if args.profile else None
    context = multiprocessing.get_context("spawn")
    with context.Pool(args.client_procs) as pool:
        bench = Bench(args, url, token, server, pool)
        for level in levels:
            store = data["stores"][level]
            row: dict[str, Any] = {}
            creates = bench.cell("create", level, args.ops, {"store": store})
            ids = creates.pop("out")
            expected = {f"/c/{i:05d}.md": create_content(i) for i in range(args.ops)}
            check_store(url, token, store, expected)
            updates = bench.cell("update", level, args.ops, {"store": store, "ids": ids})
            updates.pop("out")
            for i in range(args.ops):
                expected[f"/c/{i % len(ids):05d}.md"] = update_content(i)
            check_store(url, token, store, expected)
            gets = bench.cell("get", level, args.ops, {"store": data["big"], "ids": data["ids"]})
            gets.pop("out")
            # A whole number of listings per client, so that none finishes alone.
            listings = level * -(-base_listings // level)
            lists = bench.cell(
                "list", level, listings, {"store": data["big"], "paths": data["paths"]}
            )
            lists.pop("out")
            lists["rate"] *= pages_per_listing
            for column, cell in zip(COLUMNS, (creates, updates, gets, lists), strict=True):
                row[column] = cell
            results[str(level)] = row
    outcome: dict[str, Any] = {"levels": results, "fill_seconds": round(fill_seconds, 2)}
    if profiler is not None:
        outcome["profile"] = stop_profiler(*profiler)
    return outcome


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--memories", type=int, default=2000, help="memories in the listed store")
    parser.add_argument("--ops", type=int, default=1000, help="operations per cell (<= 2000)")
    parser.add_argument("--levels", default="1,8", help="client counts, comma-separated")
    parser.add_argument("--client-procs", type=int, default=1, help="processes the clients run in")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="py-spy the server through the cells (bench/results/server-<time>.txt);"
        " its rates are then not comparable",
    )
    parser.add_argument(
        "--client", choices=sorted(CLIENTS), default="raw", help="raw HTTP or StoreClient"
    )
    parser.add_argument(
        "--serve",
        default=f"{shlex.quote(sys.executable)} -m memfs serve",
        help="the command starting the server, before --db and --port (its token in MEMFS_SERVE_TOKEN)"
        " (another checkout: 'env PYTHONPATH=DIR python -m memfs serve', or more flags)",
    )
    args = parser.parse_args()
    token = secrets.token_urlsafe(16)
    with tempfile.TemporaryDirectory(prefix="memfs-bench-") as tmp:
        server, url = start_server(
            shlex.split(args.serve), os.path.join(tmp, "bench.sqlite3"), token
        )
        try:
            result = run(args, url, token, server)
        except BenchFailure as e:
            print(f"server_bench: FAILED: {e}", file=sys.stderr)
            return 1
        finally:
            server.terminate()
            try:
                server.wait(10)
            except subprocess.TimeoutExpired:
                server.kill()
    print(
        f"memfs serve on loopback, {args.memories} memories, {args.ops} ops per cell,"
        f" {args.client} clients in {args.client_procs} process(es)\nserver: {args.serve}"
    )
    print(f"{'clients':>7}  " + "  ".join(f"{c:>12}" for c in COLUMNS) + "   CPU client/server")
    for level, row in result["levels"].items():
        cpu = " ".join(
            f"{row[c]['client_cpu'] * 100:.0f}/{row[c]['server_cpu'] * 100:.0f}%" for c in COLUMNS
        )
        print(f"{level:>7}  " + "  ".join(f"{row[c]['rate']:12.0f}" for c in COLUMNS) + f"   {cpu}")
    print("server CPU per request, µs (a list page is one request):")
    for level, row in result["levels"].items():
        per = [row[c]["server_cpu"] / row[c]["rate"] * 1e6 for c in COLUMNS]
        print(f"{level:>7}  " + "  ".join(f"{x:12.0f}" for x in per))
    print(f"every answer and the stores checked; filling took {result['fill_seconds']} s")
    if "profile" in result:
        split = ", ".join(
            f"{k} {v * 100:.0f}%" for k, v in result["profile"].items() if k != "idle_samples"
        )
        print(f"server's busy time (py-spy): {split}")
    RESULTS.mkdir(exist_ok=True)
    out = RESULTS / f"server_bench-{time.strftime('%Y%m%dT%H%M%S')}.json"
    result.update(
        {
            "memories": args.memories,
            "ops": args.ops,
            "client_procs": args.client_procs,
            "client": args.client,
            "serve": args.serve,
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
        }
    )
    out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {out.relative_to(Path.cwd()) if out.is_relative_to(Path.cwd()) else out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
