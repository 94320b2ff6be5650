"""What the benchmarks that seed stores and watch memfs processes share:
seeded text, and a process's CPU time from /proc."""

from __future__ import annotations

import os
import random

CLOCK_TICK = os.sysconf("SC_CLK_TCK")
"""/proc counts CPU time in these ticks a second (so a figure is good to 1/TICK s)."""

WORDS = ["memory", "store", "agent", "note", "file", "path", "cache", "sync", "fuse", "kernel",
         "token", "version"]  # fmt: skip


def text_of(size: int, rng: random.Random) -> str:
    """Plain text of about `size` bytes, in lines of words."""
    out: list[str] = []
    total = 0
    while total < size:
        line = " ".join(rng.choice(WORDS) for _ in range(10)) + "\n"
        out.append(line)
        total += len(line)
    return "".join(out)[:size]


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process so far."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICK
