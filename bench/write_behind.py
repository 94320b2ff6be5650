"""Edits in the store within seconds (issue 30, section 3): how long a closed
file takes to be in the store, and what a mount where nothing changes sends.

Starts its own `memfs serve` (SQLite in a temporary folder) behind the fault
proxy of `memfs.testing` delaying every request by `--delay-ms` (20 ms: a
real link to the API), mounts one store through it with `memfs mount
--daemon` at the default sync interval (15 s) unless told otherwise, and
measures:

1. close to store: `--rounds` times, a file written and closed through the
   mount, then the server read directly (not through the proxy) every 20 ms
   until it holds the new content; a random pause of up to the interval
   between rounds, so that rounds fall anywhere between two passes;
2. idle requests: nothing written for `--idle-seconds`, the requests the
   proxy saw, as requests per minute (and the passes `memfs status` counted).

Only the public `memfs.testing` and the `memfs` command are used, so the
same script measures another checkout: run it with that checkout's Python
from a folder outside both (`cd /tmp && /work/main/.venv/bin/python
PATH/bench/write_behind.py`). Prints a table and writes JSON to
bench/results/write-behind-<time>.json. Always unmounts and stops the
server. Needs root (FUSE). Usage:

    .venv/bin/python bench/write_behind.py [--rounds 8] [--delay-ms 20]
        [--sync-interval 15] [--idle-seconds 60]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from memfs.testing import FakeStore, FaultProxyProcess, ServerProcess

RESULTS_DIR = Path(__file__).resolve().parent / "results"
POLL_SECONDS = 0.02


def memfs(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(
        [sys.executable, "-m", "memfs", *args], env=env, capture_output=True, text=True, timeout=120
    )
    if r.returncode != 0:
        raise SystemExit(f"memfs {args[0]} exited {r.returncode}: {r.stderr.strip()}")
    return r


def store_status(env: dict[str, str]) -> dict[str, Any]:
    (status,) = json.loads(memfs(env, "status", "--json").stdout)
    return dict(status)


def close_to_store(store: FakeStore, path: Path, rounds: int, interval: float) -> list[float]:
    """Seconds from each close() until the server holds the file's new content."""
    rng = random.Random(30)
    out = []
    for n in range(rounds):
        time.sleep(rng.uniform(0, interval))
        content = f"round {n} at {time.time()}\n"
        with open(path / "note.md", "w") as f:
            f.write(content)
        closed = time.monotonic()
        while store.memories().get("/note.md") != content:
            if time.monotonic() - closed > 4 * interval + 30:
                raise SystemExit(f"round {n}: the store never held the new content")
            time.sleep(POLL_SECONDS)
        out.append(time.monotonic() - closed)
        print(f"  round {n}: {out[-1]:.2f} s", flush=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--sync-interval", type=float, default=15.0)
    parser.add_argument("--idle-seconds", type=float, default=60.0)
    args = parser.parse_args()
    import memfs as package

    with tempfile.TemporaryDirectory(prefix="memfs-write-behind-") as tmp_name:
        tmp = Path(tmp_name)
        server = ServerProcess(tmp / "store.sqlite3").start()
        proxy = FaultProxyProcess(server.url).start()
        mount_path = tmp / "mnt" / "notes"
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMFS_", "ANTHROPIC_"))}
        env.update(MEMFS_RUNTIME_DIR=str(tmp / "run"), MEMFS_TOKEN=server.token)
        try:
            proxy.set(delay=args.delay_ms / 1000)
            store_id = server.create_store("write-behind bench")["id"]
            store = FakeStore(server, store_id)
            store.put("/seed.md", "in the store before the mount\n")
            memfs(
                env, "mount", "--daemon", "--store", f"{store_id}={mount_path}",
                "--root", str(tmp / "mnt"), "--cache-dir", str(tmp / "cache"),
                "--api-url", proxy.url, "--sync-interval", f"{args.sync_interval:g}",
            )  # fmt: skip
            print(f"close to store, {args.rounds} rounds:", flush=True)
            delays = close_to_store(store, mount_path, args.rounds, args.sync_interval)
            time.sleep(args.sync_interval)  # whatever follows the last write is done
            before = store_status(env)
            proxy.reset()
            proxy.set(delay=args.delay_ms / 1000)
            time.sleep(args.idle_seconds)
            seen = proxy.counters()
            after = store_status(env)
        finally:
            subprocess.run(
                [sys.executable, "-m", "memfs", "unmount", str(mount_path)],
                env=env, capture_output=True, timeout=120,
            )  # fmt: skip
            subprocess.run(["fusermount3", "-uz", str(mount_path)], capture_output=True)
            proxy.stop()
            server.stop()
    per_minute = seen.requests_seen * 60 / args.idle_seconds
    result = {
        "memfs": str(Path(package.__file__).resolve().parent.parent),
        "delay_ms": args.delay_ms,
        "sync_interval": args.sync_interval,
        "close_to_store_s": delays,
        "idle_seconds": args.idle_seconds,
        "idle_requests": seen.requests_seen,
        "idle_requests_by_path": seen.requests_by_method_path,
        "idle_passes": after["passes"] - before["passes"],
    }
    print(f"memfs from {result['memfs']}, a {args.delay_ms:g} ms link, interval "
          f"{args.sync_interval:g} s")  # fmt: skip
    print("| close() to in the store | median | min | max |")
    print("| --- | --- | --- | --- |")
    print(
        f"| {len(delays)} rounds | {statistics.median(delays):.2f} s | {min(delays):.2f} s "
        f"| {max(delays):.2f} s |"
    )
    print(
        f"idle: {seen.requests_seen} requests in {args.idle_seconds:g} s ({per_minute:.1f} a "
        f"minute), {result['idle_passes']} passes: {seen.requests_by_method_path}"
    )
    RESULTS_DIR.mkdir(exist_ok=True)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    (RESULTS_DIR / f"write-behind-{stamp}.json").write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
