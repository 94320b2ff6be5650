"""The final-sync benchmark: does a stop fit its bound on a real link?

Starts its own `memfs serve` and a fault proxy in front of it (tests/support/
faults.py) that adds a fixed delay to every request, the latency of a real
link. For each latency (0 and 20 ms by default), on a fresh store:

1. final sync: 2,000 new files are written through a `memfs mount --daemon`
   (sync interval 1 h, so nothing is pushed before the stop), then
   `memfs unmount` is timed: the final sync uploads everything, then the
   folder is unmounted. The store must then hold every file, byte for byte,
   or the run fails;
2. periodic pass: the same store mounted again, 200 files rewritten, one
   `memfs sync` timed (the pass report's requests are printed too); the
   store must then hold the 200 new contents.

`--concurrency N` passes `--sync-concurrency N` to the mount (default: the
mount's own default), to compare against sequential uploads (`1`).

Prints a table and writes JSON to bench/results/final-sync-<time>.json.
Needs root (FUSE). Usage:

    .venv/bin/python bench/final_sync_bench.py [--files 2000] [--changed 200]
        [--latency-ms 0 20] [--concurrency N]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memfs.testing import FakeStore  # noqa: E402
from tests.support import ServerProcess  # noqa: E402
from tests.support.faults import FaultProxyProcess  # noqa: E402
from tests.support.mounts import Mounter  # noqa: E402

RESULTS_DIR = ROOT / "bench" / "results"


def stored(server: ServerProcess, store_id: str) -> dict[str, str]:
    """Every memory of the store: path -> content."""
    return FakeStore(server, store_id).memories()


def one_latency(
    args: argparse.Namespace, server: ServerProcess, mounter: Mounter, latency: float
) -> dict:
    store_id = server.create_store(f"final-sync {latency * 1000:.0f} ms")["id"]
    with FaultProxyProcess(server.url) as proxy:
        extra = ["--api-url", proxy.url, "--sync-interval", "3600", "--final-sync-timeout", "30"]
        if args.concurrency:
            extra += ["--sync-concurrency", str(args.concurrency)]
        mount = mounter.mount_one(store_id, extra=tuple(extra))
        expected: dict[str, str] = {}
        folders = max(1, args.files // 100)
        for i in range(args.files):
            rel = f"d{i % folders:03d}/f{i:05d}.md"
            (mount / rel).parent.mkdir(exist_ok=True)
            content = f"file {i}\n" * (1 + i % 5)
            (mount / rel).write_text(content)
            expected["/" + rel] = content
        proxy.set(delay=latency)
        before = proxy.state()["counters"]["requests_seen"]
        started = time.perf_counter()
        r = mounter.unmount(mount, check=False)
        final_s = time.perf_counter() - started
        final_requests = proxy.state()["counters"]["requests_seen"] - before
        if r.returncode != 0:
            raise SystemExit(f"final sync left files behind:\n{r.stderr[-2000:]}")
        if stored(server, store_id) != expected:
            raise SystemExit("the store does not hold what was written before the stop")

        mount = mounter.mount_one(store_id, extra=tuple(extra))
        changed = sorted(expected)[: args.changed]
        for path in changed:
            content = f"rewritten {path}\n"
            (mount / path.lstrip("/")).write_text(content)
            expected[path] = content
        time.sleep(2.1)  # closed files are pushed at once; this only steadies the run
        started = time.perf_counter()
        out = mounter.memfs("sync", "--json", str(mount), check=True)
        pass_s = time.perf_counter() - started
        report = json.loads(out.stdout)[0]["report"]
        mounter.unmount(mount)
        if stored(server, store_id) != expected:
            raise SystemExit("the store does not hold the 200 rewritten files")
    return {
        "latency_ms": latency * 1000,
        "final_sync_s": final_s,
        "final_sync_requests": final_requests,
        "periodic_pass_s": pass_s,
        "periodic_pass_requests": report["requests"],
        "periodic_pass_pushed": report["pushed"],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--changed", type=int, default=200)
    parser.add_argument("--latency-ms", type=float, nargs="+", default=[0.0, 20.0])
    parser.add_argument("--concurrency", type=int, default=None)
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("final_sync_bench: needs root for FUSE mounts", file=sys.stderr)
        return 1
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    rows = []
    with tempfile.TemporaryDirectory(prefix="memfs-finalbench-") as tmp:
        server = ServerProcess(Path(tmp) / "store.db").start()
        mounter = Mounter(server, Path(tmp))
        try:
            for ms in args.latency_ms:
                rows.append(one_latency(args, server, mounter, ms / 1000))
        finally:
            mounter.cleanup()
            server.stop()
    print(
        f"{args.files} new files at stop, {args.changed} changed in a periodic pass, "
        f"concurrency {args.concurrency or 'default'}"
    )
    print(f"{'latency':>8} {'final sync':>11} {'requests':>9} {'pass (200)':>11} {'requests':>9}")
    for r in rows:
        print(
            f"{r['latency_ms']:>6.0f}ms {r['final_sync_s']:>10.2f}s {r['final_sync_requests']:>9}"
            f" {r['periodic_pass_s']:>10.2f}s {r['periodic_pass_requests']:>9}"
        )
    RESULTS_DIR.mkdir(exist_ok=True)
    out = RESULTS_DIR / f"final-sync-{stamp}.json"
    result = {
        "rows": rows,
        "config": {
            "files": args.files,
            "changed": args.changed,
            "concurrency": args.concurrency,
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
        },
    }
    out.write_text(json.dumps(result, indent=2))
    print(f"\nresults: {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
