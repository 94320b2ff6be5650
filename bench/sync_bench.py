"""The sync benchmark: what a mount of a 2,000-memory store costs.

Starts its own `memfs serve` (SQLite in a temporary folder, access log on so
the server's side of the conversation can be counted), fills a store with
2,000 memories of 1-4 KB in 40 folders, then drives a real
`memfs mount --daemon` through the CLI as an operator would and measures:

1. browsable: from starting `memfs mount` until it returned and an os.walk
   of the mount lists every file (and the os.walk alone);
2. all cached: from starting `memfs mount` until `memfs status --json` shows
   cached == files (polled every 50 ms);
3. idle pass: `memfs sync` N times with nothing changed: requests per pass
   (the pass report), CPU time of the store process per pass (/proc/<pid>/stat)
   and wall time of each `memfs sync` command;
4. 10 changed files: 10 files rewritten through the mount, then one pass;
   10 memories updated over HTTP, then one pass (and the mount shows them);
5. warm remount: unmount, mount again on the same cache folder: time to
   browsable and the requests and single-memory GETs it took;
6. listing mode: the store mounted again through a fault proxy that refuses
   the version feed (403), as the hosted API may for a sessions token: the
   idle pass's requests and CPU when remote changes are followed by listings.

Prints a table and writes JSON to bench/results/sync-<time>.json; exits 1,
with one sentence, when what the table shows as expected does not hold (idle
passes change nothing, 10 pushed, 10 pulled and shown, no single-memory GET
on a warm remount). Always
unmounts (memfs unmount --all, then fusermount3 -uz) and stops the server.
Needs root (FUSE). Usage:

    .venv/bin/python bench/sync_bench.py [--memories 2000] [--folders 40] [--idle-passes 20]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import trio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _procs import CLOCK_TICK, cpu_seconds, text_of  # noqa: E402

from memfs.api import MARKER_NAME  # noqa: E402
from memfs.client import StoreClient  # noqa: E402
from tests.support import ServerProcess  # noqa: E402
from tests.support.faults import FaultProxyProcess  # noqa: E402
from tests.support.mounts import Mounter  # noqa: E402

RESULTS_DIR = ROOT / "bench" / "results"
POLL_SECONDS = 0.05
CACHED_TIMEOUT = 300.0


async def fill_store(url: str, token: str, memories: int, folders: int) -> tuple[str, list]:
    """A new store with `memories` memories of 1-4 KB; its id and [(id, path)]."""
    rng = random.Random(7)
    created: list[tuple[str, str]] = []
    async with StoreClient(url, token, auth="x-api-key", max_connections=8) as client:
        store = await client.create_store("sync-bench")
        items = [
            (f"/folder-{i % folders:02d}/note-{i:05d}.md", text_of(rng.randint(1024, 4096), rng))
            for i in range(memories)
        ]

        async def worker() -> None:
            while items:
                path, content = items.pop()
                m = await client.create_memory(store.id, path, content, view="basic")
                created.append((m.id, path))

        async with trio.open_nursery() as nursery:
            for _ in range(8):
                nursery.start_soon(worker)
    return store.id, created


async def update_remote(url: str, token: str, store_id: str, targets: list) -> dict[str, str]:
    """Update `targets` [(id, path)] over HTTP; path -> new content."""
    new: dict[str, str] = {}
    async with StoreClient(url, token, auth="x-api-key") as client:
        for memory_id, path in targets:
            content = f"remote edit {secrets.token_hex(4)}\n" * 20
            await client.update_memory(store_id, memory_id, content=content, view="basic")
            new[path] = content
    return new


def walk_files(mount: Path) -> int:
    """How many files an os.walk of the mount lists (the marker excluded)."""
    count = 0
    for _dir, _dirs, files in os.walk(mount):
        count += sum(1 for f in files if f != MARKER_NAME)
    return count


class AccessLog:
    """Counts the server's completed requests from its access log on stderr."""

    def __init__(self, server: ServerProcess, store_id: str) -> None:
        self.server = server
        self.single_get = re.compile(
            rf'"GET /v1/memory_stores/{store_id}/memories/mem_\w+ [\d.]+" \d{{3}} '
        )
        self.any_request = re.compile(r'"[A-Z]+ /v1/\S* [\d.]+" \d{3} ')

    def mark(self) -> int:
        return len(self.server.stderr)

    def since(self, mark: int) -> dict[str, int]:
        text = self.server.stderr[mark:]
        return {
            "requests": len(self.any_request.findall(text)),
            "single_memory_gets": len(self.single_get.findall(text)),
        }


def one_status(mounter: Mounter) -> dict:
    statuses = mounter.status()
    if len(statuses) != 1 or "files" not in statuses[0]:
        raise RuntimeError(f"unexpected memfs status: {statuses}")
    return statuses[0]


def sync_report(mounter: Mounter, mount: Path) -> tuple[dict, float]:
    """`memfs sync --json` of one mount: the pass report and the command's wall time."""
    started = time.perf_counter()
    r = mounter.memfs("sync", "--json", str(mount), check=True)
    wall = time.perf_counter() - started
    reply = json.loads(r.stdout)[0]
    if not reply.get("ok"):
        raise RuntimeError(f"sync failed: {reply}")
    return reply["report"], wall


def start_profilers(pids: dict[str, int], stamp: str) -> list[subprocess.Popen]:
    """py-spy (collapsed stacks) on each named process, until stopped with SIGINT."""
    py_spy = Path(sys.executable).parent / "py-spy"
    if not py_spy.exists():
        raise SystemExit("sync_bench: --profile needs py-spy (.venv/bin/pip install py-spy)")
    RESULTS_DIR.mkdir(exist_ok=True)
    procs = []
    for name, pid in pids.items():
        out = RESULTS_DIR / f"sync-{stamp}-{name}.txt"
        cmd = [str(py_spy), "record", "-p", str(pid), "-f", "raw", "-r", "200", "-o", str(out)]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
    return procs


def stop_profilers(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        proc.send_signal(signal.SIGINT)
    for proc in procs:
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def store_pid(mounter: Mounter) -> int:
    pids = mounter.store_pids()
    if len(pids) != 1:
        raise RuntimeError(f"expected one store process, found {pids}")
    return pids[0]


def mount_and_browse(
    mounter: Mounter, store_id: str, memories: int, profile: dict | None = None
) -> dict:
    """Mount, then walk the tree until it lists every memory; the timings.

    With `profile` ({"stamp": ..., "server_pid": ...}), py-spy follows the
    store process and the server from the moment the mount returns; the
    Popen objects are returned under "profilers"."""
    started = time.perf_counter()
    mount = mounter.mount_one(store_id, extra=("--sync-interval", "3600"))
    returned = time.perf_counter()
    profilers = []
    if profile is not None:
        profilers = start_profilers(
            {"store": store_pid(mounter), "server": profile["server_pid"]}, profile["stamp"]
        )
    seen = walk_files(mount)
    walked = time.perf_counter()
    if seen != memories:
        raise RuntimeError(f"os.walk listed {seen} files, expected {memories}")
    return {
        "mount": mount,
        "profilers": profilers,
        "started": started,
        "mount_command_s": returned - started,
        "walk_s": walked - returned,
        "browsable_s": walked - started,
    }


def wait_all_cached(mounter: Mounter, started: float) -> tuple[float, dict]:
    deadline = time.monotonic() + CACHED_TIMEOUT
    while True:
        st = one_status(mounter)
        if st["files"] and st["cached"] == st["files"] and st["prefetched"]:
            return time.perf_counter() - started, st
        if time.monotonic() > deadline:
            raise RuntimeError(f"not all cached after {CACHED_TIMEOUT:.0f} s: {st}")
        time.sleep(POLL_SECONDS)


def bench(args: argparse.Namespace, tmp: Path) -> dict:
    token = secrets.token_urlsafe(24)
    server = ServerProcess(
        tmp / "store.db", token="", extra_args=["--access-log"], env={"MEMFS_SERVE_TOKEN": token}
    )
    server.start()
    server.token = token
    mounter = Mounter(server, tmp)
    try:
        return run_phases(args, server, mounter, token)
    finally:
        mounter.cleanup()
        server.stop()


def run_phases(args: argparse.Namespace, server: ServerProcess, mounter: Mounter, token: str):
    result: dict = {}
    t0 = time.perf_counter()
    store_id, created = trio.run(fill_store, server.url, token, args.memories, args.folders)
    result["fill_s"] = time.perf_counter() - t0
    log = AccessLog(server, store_id)

    # 1 + 2: cold mount.
    mark = log.mark()
    server_cpu = cpu_seconds(server.proc.pid)
    profile = {"stamp": args.stamp, "server_pid": server.proc.pid} if args.profile else None
    cold = mount_and_browse(mounter, store_id, args.memories, profile)
    mount = cold.pop("mount")
    profilers = cold.pop("profilers")
    all_cached_s, st = wait_all_cached(mounter, cold.pop("started"))
    stop_profilers(profilers)
    pid = st["pid"]
    cold["all_cached_s"] = all_cached_s
    cold["store_process_requests"] = st["requests"]
    cold["store_process_cpu_s"] = cpu_seconds(pid)
    cold["server_cpu_s"] = cpu_seconds(server.proc.pid) - server_cpu
    cold["server"] = log.since(mark)
    result["cold_mount"] = cold

    # 3: idle passes (one first, so a pass left over from mounting is not counted).
    sync_report(mounter, mount)
    passes = []
    server_cpu = cpu_seconds(server.proc.pid)
    for _ in range(args.idle_passes):
        cpu_before = cpu_seconds(pid)
        report, wall = sync_report(mounter, mount)
        passes.append(
            {
                "requests": report["requests"],
                "full_listing": report["full_listing"],
                "cpu_s": cpu_seconds(pid) - cpu_before,
                "wall_s": wall,
                "changed": sum(report[k] for k in ("pushed", "pulled", "moved", "deleted_remote")),
            }
        )
    server_cpu = cpu_seconds(server.proc.pid) - server_cpu
    feed_passes = [p for p in passes if not p["full_listing"]] or passes
    started = time.perf_counter()
    mounter.memfs("status", "--json", check=True)
    cli_baseline = time.perf_counter() - started
    result["idle"] = {
        "passes": len(passes),
        "full_listing_passes": sum(p["full_listing"] for p in passes),
        "requests_per_pass": sum(p["requests"] for p in feed_passes) / len(feed_passes),
        "full_listing_requests": [p["requests"] for p in passes if p["full_listing"]],
        "cpu_ms_per_pass": 1000 * sum(p["cpu_s"] for p in passes) / len(passes),
        "server_cpu_ms_per_pass": 1000 * server_cpu / len(passes),
        "wall_ms_per_sync_command": 1000 * sum(p["wall_s"] for p in passes) / len(passes),
        "wall_ms_min_sync_command": 1000 * min(p["wall_s"] for p in passes),
        "wall_ms_status_command": 1000 * cli_baseline,
        "changed_anything": sum(p["changed"] for p in passes),
        "clock_tick_ms": 1000 / CLOCK_TICK,
    }

    # 4: 10 changed files, local then remote.
    rng = random.Random(11)
    local = rng.sample(created, 10)
    for _id, path in local:
        with open(mount / path.lstrip("/"), "w") as f:
            f.write(f"local edit {secrets.token_hex(4)}\n" * 20)
    mark = log.mark()
    cpu_before = cpu_seconds(pid)
    report, wall = sync_report(mounter, mount)
    result["local_10"] = {
        "requests": report["requests"],
        "pushed": report["pushed"],
        "full_listing": report["full_listing"],
        "cpu_ms": 1000 * (cpu_seconds(pid) - cpu_before),
        "wall_ms": 1000 * wall,
        "server": log.since(mark),
    }
    remote = [c for c in created if c not in local][:10]
    new = trio.run(update_remote, server.url, token, store_id, remote)
    mark = log.mark()
    cpu_before = cpu_seconds(pid)
    report, wall = sync_report(mounter, mount)
    shown = sum((mount / path.lstrip("/")).read_text() == content for path, content in new.items())
    result["remote_10"] = {
        "requests": report["requests"],
        "pulled": report["pulled"],
        "full_listing": report["full_listing"],
        "cpu_ms": 1000 * (cpu_seconds(pid) - cpu_before),
        "wall_ms": 1000 * wall,
        "server": log.since(mark),
        "mount_shows_new_content": f"{shown}/{len(new)}",
    }

    # 5: warm remount on the same cache folder.
    mounter.unmount(mount)
    mark = log.mark()
    warm = mount_and_browse(mounter, store_id, args.memories)
    warm.pop("mount")
    warm.pop("profilers")
    all_cached_s, st = wait_all_cached(mounter, warm.pop("started"))
    warm["all_cached_s"] = all_cached_s
    warm["store_process_requests"] = st["requests"]
    warm["server"] = log.since(mark)
    result["warm_remount"] = warm

    # 6: listing mode (the feed refused).
    mounter.unmount(mounter.root / "s")
    with FaultProxyProcess(server.url) as proxy:
        proxy.set(status=403, status_rate=1.0, match_path="/memory_versions")
        mount = mounter.mount_one(
            store_id, extra=("--sync-interval", "3600", "--api-url", proxy.url)
        )
        wait_all_cached(mounter, time.perf_counter())
        pid = store_pid(mounter)
        if one_status(mounter).get("sync_mode") != "listing":
            raise RuntimeError("the mount did not switch to listing mode")
        sync_report(mounter, mount)
        passes = []
        for _ in range(args.idle_passes):
            cpu_before = cpu_seconds(pid)
            report, wall = sync_report(mounter, mount)
            passes.append((report["requests"], cpu_seconds(pid) - cpu_before, wall))
        mounter.unmount(mount)
    result["listing_idle"] = {
        "passes": len(passes),
        "requests_per_pass": sum(p[0] for p in passes) / len(passes),
        "cpu_ms_per_pass": 1000 * sum(p[1] for p in passes) / len(passes),
        "wall_ms_per_sync_command": 1000 * sum(p[2] for p in passes) / len(passes),
    }
    return result


def table(r: dict) -> str:
    cold, warm, idle = r["cold_mount"], r["warm_remount"], r["idle"]
    loc, rem = r["local_10"], r["remote_10"]
    rows = [
        ("store filled (setup)", f"{r['fill_s']:.1f} s"),
        ("cold: memfs mount returned", f"{cold['mount_command_s'] * 1000:.0f} ms"),
        ("cold: os.walk alone", f"{cold['walk_s'] * 1000:.0f} ms"),
        ("cold: browsable", f"{cold['browsable_s'] * 1000:.0f} ms"),
        ("cold: all cached", f"{cold['all_cached_s'] * 1000:.0f} ms"),
        (
            "cold: CPU store process / server",
            f"{cold['store_process_cpu_s']:.1f} / {cold['server_cpu_s']:.1f} s",
        ),
        (
            "cold: requests (client / server)",
            f"{cold['store_process_requests']} / {cold['server']['requests']}",
        ),
        (
            f"idle pass: requests ({idle['passes']} passes, "
            f"{idle['full_listing_passes']} full listings)",
            f"{idle['requests_per_pass']:.1f}",
        ),
        (
            "idle pass: CPU store process / server",
            f"{idle['cpu_ms_per_pass']:.1f} / {idle['server_cpu_ms_per_pass']:.1f} ms",
        ),
        (
            "idle pass: memfs sync wall (mean / min)",
            f"{idle['wall_ms_per_sync_command']:.0f} / {idle['wall_ms_min_sync_command']:.0f} ms",
        ),
        ("  memfs status wall (CLI start-up)", f"{idle['wall_ms_status_command']:.0f} ms"),
        (
            "10 local edits: requests (pushed)",
            f"{loc['requests']} ({loc['pushed']})",
        ),
        ("10 local edits: CPU / wall", f"{loc['cpu_ms']:.0f} / {loc['wall_ms']:.0f} ms"),
        (
            "10 remote edits: requests (pulled, GETs)",
            f"{rem['requests']} ({rem['pulled']}, {rem['server']['single_memory_gets']})",
        ),
        ("10 remote edits: CPU / wall", f"{rem['cpu_ms']:.0f} / {rem['wall_ms']:.0f} ms"),
        ("10 remote edits: shown by the mount", rem["mount_shows_new_content"]),
        ("warm: memfs mount returned", f"{warm['mount_command_s'] * 1000:.0f} ms"),
        ("warm: os.walk alone", f"{warm['walk_s'] * 1000:.0f} ms"),
        ("warm: browsable", f"{warm['browsable_s'] * 1000:.0f} ms"),
        (
            "warm: requests (client / server / GETs)",
            f"{warm['store_process_requests']} / {warm['server']['requests']} / "
            f"{warm['server']['single_memory_gets']}",
        ),
    ]
    ratio = cold["browsable_s"] / warm["browsable_s"] if warm["browsable_s"] else 0
    rows.append(("cold / warm browsable", f"{ratio:.2f}x"))
    lst = r["listing_idle"]
    rows += [
        ("listing mode idle pass: requests", f"{lst['requests_per_pass']:.1f}"),
        (
            "listing mode idle pass: CPU / sync wall",
            f"{lst['cpu_ms_per_pass']:.1f} / {lst['wall_ms_per_sync_command']:.0f} ms",
        ),
    ]
    width = max(len(k) for k, _ in rows) + 2
    return "\n".join(k.ljust(width) + v.rjust(16) for k, v in rows)


def broken_expectations(r: dict) -> list[str]:
    """What the table shows that a correct mount would not: each as a clause."""
    broken = []
    idle = r["idle"]
    if idle["changed_anything"]:
        broken.append(f"idle passes changed {idle['changed_anything']} files (expected 0)")
    if r["local_10"]["pushed"] != 10:
        broken.append(f"a pass after 10 local edits pushed {r['local_10']['pushed']} (expected 10)")
    if r["remote_10"]["pulled"] != 10:
        broken.append(
            f"a pass after 10 remote edits pulled {r['remote_10']['pulled']} (expected 10)"
        )
    if r["remote_10"]["mount_shows_new_content"] != "10/10":
        broken.append(
            f"the mount shows {r['remote_10']['mount_shows_new_content']} remote edits "
            "(expected 10/10)"
        )
    gets = r["warm_remount"]["server"]["single_memory_gets"]
    if gets:
        broken.append(f"the warm remount fetched {gets} memories one by one (expected 0)")
    return broken


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=2000)
    parser.add_argument("--folders", type=int, default=40)
    parser.add_argument("--idle-passes", type=int, default=20)
    parser.add_argument(
        "--profile",
        action="store_true",
        help="py-spy the store process and the server while the cold mount caches everything",
    )
    args = parser.parse_args()
    args.stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    if os.geteuid() != 0:
        print("sync_bench: needs root for FUSE mounts", file=sys.stderr)
        return 1
    if args.memories < 20:
        print("sync_bench: --memories must be at least 20", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory(prefix="memfs-syncbench-") as tmp:
        result = bench(args, Path(tmp))
    result["config"] = {
        "memories": args.memories,
        "folders": args.folders,
        "idle_passes": args.idle_passes,
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
    }
    print(table(result))
    RESULTS_DIR.mkdir(exist_ok=True)
    out = RESULTS_DIR / f"sync-{args.stamp}.json"
    out.write_text(json.dumps(result, indent=2))
    print(f"\nresults: {out.relative_to(ROOT)}")
    broken = broken_expectations(result)
    if broken:
        print(f"sync_bench: failed, {'; '.join(broken)}.", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
