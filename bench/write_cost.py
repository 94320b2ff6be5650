"""What a write costs the store process: bytes it writes to the disk per byte a
program writes through the mount, from the store process's /proc/PID/io
(`write_bytes`), for the two ways agents write files:

- append: a note grown to 100 KB by 100 appends of 1 KiB (open, write, close);
- pieces: a 100 KB file written in 4 KiB pieces.

    .venv/bin/python bench/write_cost.py

Prints the ratio of each phase; issue 29 wants it under 3. Each phase is
counted until the store process has done what it defers (the journal's apply
while idle, the WAL's checkpoint, the upload and what it records): its
`write_bytes` are read until they stay the same for `SETTLED` seconds. The
kernel counts a page when it becomes dirty, so every dirty page is written
out (`sync`) before a phase starts: what the phase dirties again counts.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from _peers import mount_memfs  # noqa: E402

KIB = 1024
APPENDS = 100
FILE_SIZE = 100 * 1000
PIECE = 4 * KIB
SETTLED = 3.0
"""Seconds without a byte written that say the store process is done."""
MOST = 60.0


def written_by(pids: list[int]) -> int:
    """Bytes the processes caused to be written to the disk so far."""
    total = 0
    for pid in pids:
        with open(f"/proc/{pid}/io") as f:
            for line in f:
                if line.startswith("write_bytes:"):
                    total += int(line.split()[1])
    return total


def settled(pids: list[int]) -> int:
    """`written_by(pids)` once it stays the same for `SETTLED` seconds (at most `MOST`)."""
    deadline = time.monotonic() + MOST
    last, since = written_by(pids), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.2)
        now = written_by(pids)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= SETTLED:
            break
    os.sync()
    return last


def append_phase(root: str) -> int:
    line = (b"x" * (KIB - 1)) + b"\n"
    path = os.path.join(root, "notes.md")
    for _ in range(APPENDS):
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line)
        finally:
            os.close(fd)
    return APPENDS * len(line)


def pieces_phase(root: str) -> int:
    data = os.urandom(FILE_SIZE)
    fd = os.open(os.path.join(root, "big.md"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        for at in range(0, FILE_SIZE, PIECE):
            os.write(fd, data[at : at + PIECE])
    finally:
        os.close(fd)
    return FILE_SIZE


def main() -> int:
    with (
        tempfile.TemporaryDirectory(prefix="memfs-write-cost-") as workdir,
        mount_memfs(workdir) as m,
    ):
        pids = m.find_pids()
        print(f"write cost: store process bytes written per program byte ({m.describe})")
        for name, phase in (("append", append_phase), ("pieces", pieces_phase)):
            before = settled(pids)
            wrote = phase(m.path)
            cost = settled(pids) - before
            print(
                f"  {name:7} {wrote / KIB:7.0f} KiB written, {cost / KIB:8.0f} KiB "
                f"by memfs: {cost / wrote:.2f}x"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
