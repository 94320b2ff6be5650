"""The requests the kernel sends one FUSE mount, counted by opcode, whatever
serves the mount (memfs, minfs, libfuse's memfs_ll): bench only.

It reads the kernel's own `fuse:fuse_request_send` and `fuse:fuse_request_end`
tracepoints (Linux 6.16 and later), in a tracing instance of its own (so the
machine's global trace is left alone), filtered on the mount's connection (its
`st_dev`). A request answered with an error counts under its opcode and again
under `OPCODE error` (a LOOKUP answered ENOENT is `LOOKUP ENOENT`). FORGET and
BATCH_FORGET do not pass through these tracepoints and are not counted. Used
only in untimed rounds: tracing every request costs time.
"""

from __future__ import annotations

import collections
import contextlib
import errno
import os
import re
import subprocess

TRACEFS = "/sys/kernel/tracing"
_SEND = re.compile(r"fuse_request_send: connection \d+ req (\d+) opcode \d+ \(FUSE_(\w+)\)")
_END = re.compile(r"fuse_request_end: connection \d+ req (\d+) len \d+ error (-?\d+)")
BUFFER_KIB = 16384
"""Per CPU: a phase of the agent workload sends up to ~10,000 requests, two events each."""


class Unavailable(Exception):
    """The kernel's FUSE tracepoints cannot be used here; `str()` says why."""


class KernelRequests:
    """Counts the requests sent to the FUSE mount at `mount_path`, from `__enter__`
    on; `take()` returns those since the last `take()` and starts again."""

    def __init__(self, mount_path: str) -> None:
        self.connection = os.stat(mount_path).st_dev
        self.instance = os.path.join(TRACEFS, "instances", f"memfs-bench-{os.getpid()}")
        self.pending: dict[str, str] = {}

    def __enter__(self) -> KernelRequests:
        if not os.path.isdir(os.path.join(TRACEFS, "instances")):
            subprocess.run(["mount", "-t", "tracefs", "nodev", TRACEFS], capture_output=True)
        if not os.path.isdir(os.path.join(TRACEFS, "events", "fuse")):
            raise Unavailable(
                "the kernel has no fuse tracepoints (Linux 6.16+, tracefs, root) to count requests"
            )
        with contextlib.suppress(FileExistsError):
            os.mkdir(self.instance)
        try:
            self._write("buffer_size_kb", str(BUFFER_KIB))
            for event in ("fuse_request_send", "fuse_request_end"):
                base = f"events/fuse/{event}"
                self._write(f"{base}/filter", f"connection == {self.connection}")
                self._write(f"{base}/enable", "1")
            self._write("trace", "")
        except OSError:
            self._remove()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._remove()

    def take(self) -> collections.Counter[str]:
        """Requests by opcode (`LOOKUP`, `CREATE`, ...; errors as `LOOKUP ENOENT`) since
        the last call; raises Unavailable when the trace buffer overflowed."""
        with open(os.path.join(self.instance, "trace")) as f:
            text = f.read()
        self._write("trace", "")
        if self._overrun():
            raise Unavailable("the trace buffer overflowed: counts would be short")
        counts: collections.Counter[str] = collections.Counter()
        for line in text.splitlines():
            sent = _SEND.search(line)
            if sent:
                self.pending[sent.group(1)] = sent.group(2)
                counts[sent.group(2)] += 1
                continue
            ended = _END.search(line)
            if ended and int(ended.group(2)) < 0:
                opcode = self.pending.pop(ended.group(1), "?")
                code = -int(ended.group(2))
                counts[f"{opcode} {errno.errorcode.get(code, code)}"] += 1
            elif ended:
                self.pending.pop(ended.group(1), None)
        return counts

    def _overrun(self) -> bool:
        cpus = os.path.join(self.instance, "per_cpu")
        for cpu in os.listdir(cpus):
            with open(os.path.join(cpus, cpu, "stats")) as f:
                for line in f:
                    if line.startswith("overrun:") and int(line.split()[1]) > 0:
                        return True
        return False

    def _write(self, name: str, value: str) -> None:
        with open(os.path.join(self.instance, name), "w") as f:
            f.write(value)

    def _remove(self) -> None:
        with contextlib.suppress(OSError):
            for event in ("fuse_request_send", "fuse_request_end"):
                self._write(f"events/fuse/{event}/enable", "0")
        with contextlib.suppress(OSError):
            os.rmdir(self.instance)


def total(counts: collections.Counter[str]) -> int:
    """Requests in `counts`, not counting the error lines twice."""
    return sum(n for op, n in counts.items() if " " not in op)
