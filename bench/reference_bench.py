"""The reference benchmark: the SDK's own memory sync and memfs, one store, a 20 ms link.

Starts its own `memfs serve` and a fault proxy in front of it (`memfs.testing`'s
`FaultProxyProcess`) that delays every request by `--delay-ms` (20 ms: a real
link), and counts what crosses it. A store of 2,000 memories of 1-4 KB in 40
folders is filled directly (not through the proxy). Then each side in turn,
the reference first, through the proxy:

- **the reference**: `SessionMemoryStores` of the Python SDK
  (`anthropic.lib.tools._memories`) as its `EnvironmentWorker` drives it: an
  `AsyncAnthropic` on the session's sessions token (a session made on `memfs
  serve`, the store at a `mount_path` in a temporary folder), `download` of the
  session it fetched, passes by `_sync_all(final=False)`, and at the end
  `finish` then `flush_writes`, each bounded by the SDK's
  `MEMORY_FLUSH_TIMEOUT` (30 s) as the worker bounds them;
- **memfs**: `memfs mount --daemon` (sync interval 1 h: only `memfs sync`
  runs passes), `memfs sync` for a pass, `memfs unmount` for the final sync.

The phases, each timed and its requests counted at the proxy:

1. materialise: the reference's `download`; memfs from starting `memfs mount`
   until it returned and an `os.walk` lists every file (browsable), then until
   a reader that starts the moment the mount returns has read every file (and
   found each one's content); memfs's requests are counted until the
   background download has finished too (all it costs to materialise);
2. idle pass: one pass with nothing changed;
3. 200 edits: 200 files rewritten in the folder, then one pass; the store
   must then hold them;
4. final sync: a fresh empty store (one per side, in a session of its own for
   the reference), 2,000 new files written, then the end of the session; the
   store must then hold every file, byte for byte.

Prints a table (phase, the reference's time and requests, memfs's, and
memfs's time over the reference's), then memfs's materialise against issue
23's targets in this run (browsable within 1 s; every file read within 0.4x
the reference's download; at most 2x its requests: each ratio and whether it
is met, also under "targets" in the JSON), and writes JSON to
bench/results/reference-<time>.json. `--only-materialise` runs the first
phase alone, on each side (for iterating; quoted figures use every phase). Exits 1 with one sentence when a side
did not end where it should (a folder or a store not holding what it must).
Always unmounts and stops what it started. Needs root (FUSE). Usage:

    .venv/bin/python bench/reference_bench.py [--memories 2000] [--edits 200]
        [--new-files 2000] [--delay-ms 20] [--only-materialise]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import secrets
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anthropic
import anyio
import trio
from anthropic.lib.tools._memories import MEMORY_FLUSH_TIMEOUT, SessionMemoryStores

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _procs import text_of  # noqa: E402

from memfs.api import MARKER_NAME, SESSIONS_BETA  # noqa: E402
from memfs.client import StoreClient  # noqa: E402
from memfs.testing import FakeStore, FaultProxyProcess  # noqa: E402
from tests.support import ServerProcess  # noqa: E402
from tests.support.mounts import Mounter  # noqa: E402

RESULTS_DIR = ROOT / "bench" / "results"
FOLDERS = 40
POLL_SECONDS = 0.05
PREFETCH_TIMEOUT = 600.0


class Failed(Exception):
    """A side did not end where it should: one sentence."""


# ---- the store, the link, the counts --------------------------------------------


async def fill_store(url: str, token: str, name: str, files: dict[str, str]) -> str:
    """A new store holding `files` (path -> content), written 8 at a time; its id."""
    async with StoreClient(url, token, auth="x-api-key", max_connections=8) as client:
        store = await client.create_store(name)
        items = list(files.items())

        async def worker() -> None:
            while items:
                path, content = items.pop()
                await client.create_memory(store.id, path, content, view="basic")

        async with trio.open_nursery() as nursery:
            for _ in range(8):
                nursery.start_soon(worker)
    return store.id


def seeded(n: int, seed: int, prefix: str) -> dict[str, str]:
    """`n` memories of 1-4 KB in `FOLDERS` folders: path -> content."""
    rng = random.Random(seed)
    return {
        f"/{prefix}-{i % FOLDERS:02d}/note-{i:05d}.md": text_of(rng.randint(1024, 4096), rng)
        for i in range(n)
    }


def edited(files: dict[str, str], n: int, seed: int) -> dict[str, str]:
    """New contents for `n` of `files`, chosen with `seed`."""
    rng = random.Random(seed)
    return {path: f"edit {secrets.token_hex(4)}\n" * 20 for path in rng.sample(sorted(files), n)}


def write_files(folder: Path, files: dict[str, str]) -> None:
    for path, content in files.items():
        target = folder / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)


def folder_files(folder: Path) -> list[Path]:
    """Every file an os.walk of `folder` lists, the marker aside."""
    return [Path(d) / f for d, _dirs, names in os.walk(folder) for f in names if f != MARKER_NAME]


def read_all(folder: Path, files: list[Path]) -> dict[str, str]:
    return {"/" + p.relative_to(folder).as_posix(): p.read_text() for p in files}


def stored(server: ServerProcess, store_id: str) -> dict[str, str]:
    return FakeStore(server, store_id).memories()


def kind_of(method_path: str) -> str:
    """What a request ("METHOD /path") is: a listing page, one memory's GET, a
    create, an update, a delete, a page of the version feed, a session's."""
    method, path = method_path.split(" ", 1)
    if "/memory_versions" in path:
        return "feed"
    if path.startswith("/v1/sessions"):
        return "session"
    one = re.search(r"/memories/[^/]+$", path) is not None
    return {
        ("GET", False): "list",
        ("GET", True): "get",
        ("POST", False): "create",
        ("POST", True): "update",
        ("DELETE", True): "delete",
    }.get((method, one), "other")


class Link:
    """The 20 ms proxy between both sides and the server, and what crossed it."""

    def __init__(self, proxy: FaultProxyProcess) -> None:
        self.proxy = proxy
        self.kinds: Counter[str] = Counter()
        """The kinds of request of the last `timed` call."""

    def seen(self) -> int:
        return self.proxy.counters().requests_seen

    def _by_kind(self) -> Counter[str]:
        out: Counter[str] = Counter()
        for method_path, n in self.proxy.counters().requests_by_method_path.items():
            out[kind_of(method_path)] += n
        return out

    def mark(self) -> tuple[int, Counter[str]]:
        return self.seen(), self._by_kind()

    def since(self, mark: tuple[int, Counter[str]]) -> int:
        """The requests sent since `mark`; their kinds go to `kinds`."""
        self.kinds = self._by_kind() - mark[1]
        return self.seen() - mark[0]

    def timed(self, run: Callable[[], Any]) -> tuple[float, int, Any]:
        """Run `run()`; its wall time, the requests it sent, its value."""
        mark = self.mark()
        started = time.perf_counter()
        value = run()
        seconds = time.perf_counter() - started
        return seconds, self.since(mark), value

    async def timed_async(self, run: Callable[[], Awaitable[None]]) -> tuple[float, int]:
        """Await `run()`; its wall time and the requests it sent."""
        mark = self.mark()
        started = time.perf_counter()
        await run()
        seconds = time.perf_counter() - started
        return seconds, self.since(mark)


def create_session(server: ServerProcess, store_id: str, mount_path: Path) -> dict:
    with server.http() as http:
        r = http.post(
            "/v1/sessions",
            json={
                "resources": [
                    {
                        "type": "memory_store",
                        "memory_store_id": store_id,
                        "mount_path": str(mount_path),
                    }
                ]
            },
            headers={"anthropic-beta": SESSIONS_BETA},
        )
    r.raise_for_status()
    session: dict = r.json()
    return session


def check(what: str, got: dict[str, str], expected: dict[str, str]) -> None:
    if got != expected:
        wrong = sum(1 for p in expected if got.get(p) != expected[p]) + len(got.keys() - expected)
        raise Failed(f"{what} differs from what it should hold in {wrong} files")


# ---- the reference ---------------------------------------------------------------


class Reference:
    """`SessionMemoryStores` for one session, as the SDK's worker runs it."""

    def __init__(self, url: str, session: dict, workdir: Path) -> None:
        self.session = session
        self.client = anthropic.AsyncAnthropic(
            base_url=url,
            auth_token=session["sessions_token"],
        )
        self.memories = SessionMemoryStores(self.client, workdir=workdir, sync_interval=5)
        self.finish_cut_off = False

    async def fetched_session(self) -> Any:
        return await self.client.beta.sessions.retrieve(self.session["id"])

    async def download(self, session: Any) -> None:
        await self.memories.download(session)

    async def sync(self) -> None:
        await self.memories._sync_all(final=False)

    async def end(self) -> None:
        """The worker's clean end: `finish`, then `flush_writes`, each within 30 s."""
        with anyio.move_on_after(MEMORY_FLUSH_TIMEOUT, shield=True) as scope:
            await self.memories.finish()
        self.finish_cut_off = scope.cancelled_caught
        with anyio.move_on_after(MEMORY_FLUSH_TIMEOUT, shield=True):
            await self.memories.flush_writes()

    async def close(self) -> None:
        await self.memories.dispose()
        await self.client.close()


async def reference_side(
    args: argparse.Namespace,
    server: ServerProcess,
    link: Link,
    store_id: str,
    files: dict[str, str],
    tmp: Path,
) -> tuple[dict, dict[str, str]]:
    """The four phases on the reference (one trio run: the SDK's client keeps its
    connections); the result, and what the store holds after."""
    result: dict = {}
    folder = tmp / "reference" / "store"
    ref = Reference(link.proxy.url, create_session(server, store_id, folder), tmp / "work")

    session = await ref.fetched_session()
    seconds, requests = await link.timed_async(lambda: ref.download(session))
    check("the reference's folder", read_all(folder, folder_files(folder)), files)
    result["materialise"] = {"seconds": seconds, "requests": requests, "kinds": link.kinds}
    if args.only_materialise:
        await ref.close()
        return result, files

    seconds, requests = await link.timed_async(ref.sync)
    result["idle"] = {"seconds": seconds, "requests": requests, "kinds": link.kinds}

    edits = edited(files, args.edits, seed=21)
    write_files(folder, edits)
    seconds, requests = await link.timed_async(ref.sync)
    files = {**files, **edits}
    check("the store after the reference's edits", stored(server, store_id), files)
    result["edits"] = {"seconds": seconds, "requests": requests, "kinds": link.kinds}
    await ref.close()

    new_store = server.create_store("reference-final")["id"]
    folder = tmp / "reference" / "final"
    ref = Reference(link.proxy.url, create_session(server, new_store, folder), tmp / "work")
    await ref.download(await ref.fetched_session())
    new = seeded(args.new_files, seed=31, prefix="new")
    write_files(folder, new)
    seconds, requests = await link.timed_async(ref.end)
    check("the reference's final store", stored(server, new_store), new)
    result["final"] = {
        "seconds": seconds,
        "requests": requests,
        "finish_cut_off": ref.finish_cut_off,
        "kinds": link.kinds,
    }
    await ref.close()
    return result, files


# ---- memfs -----------------------------------------------------------------------


def memfs_side(
    args: argparse.Namespace,
    server: ServerProcess,
    link: Link,
    mounter: Mounter,
    store_id: str,
    files: dict[str, str],
) -> dict:
    result: dict = {}
    extra = ("--api-url", link.proxy.url, "--sync-interval", "3600")
    extra += ("--final-sync-timeout", "300")

    mark = link.mark()
    started = time.perf_counter()
    mount = mounter.mount_one(store_id, extra=extra)
    returned = time.perf_counter()
    listed = folder_files(mount)  # the reader starts the moment the mount is ready
    browsable = time.perf_counter()
    contents = read_all(mount, listed)
    read = time.perf_counter()
    requests_read = link.since(mark)
    kinds_read = link.kinds
    check("memfs's mount", contents, files)
    deadline = time.monotonic() + PREFETCH_TIMEOUT
    while not mounter.status()[0].get("prefetched"):
        if time.monotonic() > deadline:
            raise Failed("memfs's background download did not finish")
        time.sleep(POLL_SECONDS)
    result["materialise"] = {
        "mount_command_seconds": returned - started,
        "browsable_seconds": browsable - started,
        "seconds": read - started,
        "requests_until_read": requests_read,
        "kinds_until_read": kinds_read,
        "requests": link.since(mark),
        "kinds": link.kinds,
    }
    if args.only_materialise:
        mounter.unmount(mount)
        return result

    def one_pass() -> dict:
        out = mounter.memfs("sync", "--json", str(mount), check=True)
        report: dict = json.loads(out.stdout)[0]["report"]
        return report

    seconds, requests, report = link.timed(one_pass)
    result["idle"] = {
        "seconds": seconds,
        "requests": requests,
        "pass_seconds": report["duration_s"],
        "kinds": link.kinds,
    }

    edits = edited(files, args.edits, seed=22)
    write_files(mount, edits)
    seconds, requests, report = link.timed(one_pass)
    check("the store after memfs's edits", stored(server, store_id), {**files, **edits})
    result["edits"] = {
        "seconds": seconds,
        "requests": requests,
        "pass_seconds": report["duration_s"],
        "kinds": link.kinds,
    }
    mounter.unmount(mount)

    new_store = server.create_store("memfs-final")["id"]
    mount = mounter.mount_one(new_store, name="final", extra=extra)
    new = seeded(args.new_files, seed=31, prefix="new")
    write_files(mount, new)
    seconds, requests, r = link.timed(lambda: mounter.unmount(mount, check=False))
    if r.returncode != 0:
        raise Failed(f"memfs's final sync left files behind: {r.stderr.strip()[-300:]}")
    check("memfs's final store", stored(server, new_store), new)
    result["final"] = {"seconds": seconds, "requests": requests, "kinds": link.kinds}
    return result


# ---- the run ---------------------------------------------------------------------


def bench(args: argparse.Namespace, tmp: Path) -> dict:
    token = secrets.token_urlsafe(24)
    server = ServerProcess(tmp / "store.db", token="", env={"MEMFS_SERVE_TOKEN": token})
    server.start()
    server.token = token
    mounter = Mounter(server, tmp)
    try:
        with FaultProxyProcess(server.url) as proxy:
            proxy.set(delay=args.delay_ms / 1000)
            link = Link(proxy)
            files = seeded(args.memories, seed=7, prefix="folder")
            started = time.perf_counter()
            store_id = trio.run(fill_store, server.url, token, "reference-bench", files)
            fill_s = time.perf_counter() - started
            reference, files = trio.run(reference_side, args, server, link, store_id, files, tmp)
            memfs = memfs_side(args, server, link, mounter, store_id, files)
    finally:
        mounter.cleanup()
        server.stop()
    return {"fill_s": fill_s, "reference": reference, "memfs": memfs}


PHASES = (
    ("materialise", "materialise {memories} memories"),
    ("idle", "idle pass"),
    ("edits", "pass after {edits} edits"),
    ("final", "final sync of {new_files} new files"),
)


def kinds_text(kinds: dict[str, int]) -> str:
    return ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items(), key=lambda kv: -kv[1]))


BROWSABLE_TARGET_S = 1.0
ALL_READ_TARGET = 0.4
REQUESTS_TARGET = 2.0
"""Issue 23's targets for materialising: browsable within 1 s; every file read
by a reader that starts when the mount returns within 0.4x the reference's
download; at most 2x its requests."""


def materialise_targets(r: dict) -> dict:
    """memfs's materialise against the reference's download, in this run."""
    ref, m = r["reference"]["materialise"], r["memfs"]["materialise"]
    all_read = m["seconds"] / ref["seconds"]
    requests = m["requests"] / ref["requests"]
    return {
        "browsable_seconds": m["browsable_seconds"],
        "browsable_met": m["browsable_seconds"] <= BROWSABLE_TARGET_S,
        "all_read_seconds": m["seconds"],
        "reference_seconds": ref["seconds"],
        "all_read_ratio": all_read,
        "all_read_met": all_read <= ALL_READ_TARGET,
        "requests": m["requests"],
        "reference_requests": ref["requests"],
        "requests_ratio": requests,
        "requests_met": requests <= REQUESTS_TARGET,
    }


def targets_text(t: dict) -> list[str]:
    def verdict(met: bool) -> str:
        return "met" if met else "MISSED"

    return [
        "materialise against issue 23's targets (this run):",
        f"  browsable        {t['browsable_seconds']:5.2f} s"
        f"{'':26}(target <= {BROWSABLE_TARGET_S:.1f} s: {verdict(t['browsable_met'])})",
        f"  every file read  {t['all_read_seconds']:5.2f} s = {t['all_read_ratio']:.2f}x the "
        f"reference's {t['reference_seconds']:.2f} s  (target <= {ALL_READ_TARGET}x: "
        f"{verdict(t['all_read_met'])})",
        f"  requests         {t['requests']:5d}   = {t['requests_ratio']:.2f}x the reference's "
        f"{t['reference_requests']:<6d}(target <= {REQUESTS_TARGET:.0f}x: "
        f"{verdict(t['requests_met'])})",
    ]


def table(r: dict, args: argparse.Namespace) -> str:
    names = {k: v.format(**vars(args)) for k, v in PHASES if k in r["memfs"]}
    width = max(len(n) for n in names.values()) + 2
    head = f"{'phase':<{width}}{'reference':>10}{'requests':>10}{'memfs':>10}{'requests':>10}"
    lines = [head + f"{'memfs/ref':>11}"]
    for key, name in names.items():
        ref, mfs = r["reference"][key], r["memfs"][key]
        ratio = mfs["seconds"] / ref["seconds"] if ref["seconds"] else float("inf")
        lines.append(
            f"{name:<{width}}{ref['seconds']:>9.2f}s{ref['requests']:>10}"
            f"{mfs['seconds']:>9.2f}s{mfs['requests']:>10}{ratio:>10.2f}x"
        )
    lines.append("\nrequests by kind (reference | memfs):")
    for key, name in names.items():
        lines.append(
            f"  {name}: {kinds_text(r['reference'][key]['kinds'])} | "
            f"{kinds_text(r['memfs'][key]['kinds'])}"
        )
    m = r["memfs"]["materialise"]
    lines.append(
        f"\nmemfs materialise: `memfs mount` returned {m['mount_command_seconds']:.2f} s, "
        f"browsable {m['browsable_seconds']:.2f} s, every file read {m['seconds']:.2f} s "
        f"({m['requests_until_read']} requests until then: "
        f"{kinds_text(m['kinds_until_read'])}; {m['requests']} with the background download)"
    )
    lines += targets_text(r["targets"])
    if "idle" not in r["memfs"]:
        return "\n".join(lines)
    lines.append(
        f"memfs pass alone (without the `memfs sync` command): idle "
        f"{r['memfs']['idle']['pass_seconds'] * 1000:.0f} ms, after the edits "
        f"{r['memfs']['edits']['pass_seconds']:.2f} s"
    )
    if r["reference"]["final"]["finish_cut_off"]:
        lines.append(
            f"the reference's finish was cut off after {MEMORY_FLUSH_TIMEOUT:.0f} s, as its "
            "worker bounds it; its flush_writes uploaded the rest"
        )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--edits", type=int, default=200)
    parser.add_argument("--new-files", type=int, default=2000)
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument(
        "--only-materialise",
        action="store_true",
        help="run the first phase alone (materialise), on each side",
    )
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("reference_bench: needs root for FUSE mounts", file=sys.stderr)
        return 1
    if not 0 < args.edits <= args.memories <= 2000 or not 0 < args.new_files <= 2000:
        print(
            "reference_bench: --edits must be at most --memories, and both --memories and "
            "--new-files between 1 and 2,000 (a store's cap)",
            file=sys.stderr,
        )
        return 1
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    try:
        with tempfile.TemporaryDirectory(prefix="memfs-refbench-") as tmp:
            result = bench(args, Path(tmp))
    except Failed as e:
        print(f"reference_bench: failed, {e}.", file=sys.stderr)
        return 1
    result["targets"] = materialise_targets(result)
    result["config"] = {
        "memories": args.memories,
        "edits": args.edits,
        "new_files": args.new_files,
        "delay_ms": args.delay_ms,
        "anthropic": anthropic.__version__,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
    }
    print(
        f"{args.memories} memories of 1-4 KB, a {args.delay_ms:.0f} ms link "
        f"(store filled in {result['fill_s']:.1f} s, anthropic {anthropic.__version__})"
    )
    print(table(result, args))
    RESULTS_DIR.mkdir(exist_ok=True)
    out = RESULTS_DIR / f"reference-{stamp}.json"
    out.write_text(json.dumps(result, indent=2))
    print(f"\nresults: {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
