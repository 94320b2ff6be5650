"""The agent-like workload: what an agent does to a folder of small notes.

One tree of small UTF-8 text files (1-4 KB) spread over a few subfolders,
driven through plain file calls in timed phases, back to back. The same
seeded tree is used on every filesystem so the times compare. Every phase's
result is checked for every file (sizes, contents, grep's matches, each
appended line, each saved file, an empty tree after the delete), so a fast
but wrong filesystem does not pass as fast. The checks that need reading the
tree again (after append and after save) run untimed after the phase, the
same on every filesystem; nothing else runs between phases.
"""

from __future__ import annotations

import collections
import os
import random
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass

PHASES = ("create", "stat", "read", "grep", "append", "save", "delete")
NEEDLE = "zanzibar"
_WORDS = [
    "memory",
    "store",
    "agent",
    "note",
    "task",
    "plan",
    "fix",
    "test",
    "build",
    "deploy",
    "review",
    "user",
    "prefers",
    "tabs",
    "spaces",
    "python",
    "rust",
    "latency",
    "cache",
    "sync",
    "mount",
    "folder",
    "path",
    "version",
    "conflict",
    "retry",
    "budget",
    "context",
    "summary",
    "decision",
    "follow",
    "up",
]


@dataclass(frozen=True)
class Tree:
    """The files of one run: relative paths in creation order and contents."""

    dirs: list[str]
    files: dict[str, str]
    needle_files: frozenset[str]


def make_tree(n_files: int = 1000, n_dirs: int = 20, seed: int = 7) -> Tree:
    """A deterministic tree: `n_files` files of 1-4 KB across `n_dirs` folders;
    about one file in five holds NEEDLE."""
    rng = random.Random(seed)
    dirs = [f"topic-{i:02d}" for i in range(n_dirs)]
    files: dict[str, str] = {}
    needles = set()
    for i in range(n_files):
        rel = f"{dirs[i % n_dirs]}/note-{i:04d}.md"
        target = rng.randint(1024, 4096)
        lines = [f"# note {i}", ""]
        size = 0
        while size < target:
            line = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(6, 14)))
            lines.append(line)
            size += len(line) + 1
        if rng.random() < 0.2:
            lines.insert(2, f"remember {NEEDLE} for later")
            needles.add(rel)
        files[rel] = "\n".join(lines) + "\n"
    return Tree(dirs=dirs, files=files, needle_files=frozenset(needles))


class WorkloadFailed(Exception):
    """The filesystem answered, but not what a correct filesystem would."""


def _create(root: str, tree: Tree) -> None:
    for d in tree.dirs:
        os.mkdir(os.path.join(root, d))
    for rel, content in tree.files.items():
        with open(os.path.join(root, rel), "w", encoding="utf-8") as f:
            f.write(content)


def _stat(root: str, tree: Tree) -> None:
    for _ in range(2):
        for rel, content in tree.files.items():
            st = os.stat(os.path.join(root, rel))
            if st.st_size != len(content.encode()):
                raise WorkloadFailed(f"stat {rel}: size {st.st_size}, wrote {len(content)}")


def _read(root: str, tree: Tree) -> None:
    for rel, content in tree.files.items():
        with open(os.path.join(root, rel), encoding="utf-8") as f:
            if f.read() != content:
                raise WorkloadFailed(f"read {rel}: content differs from what was written")


def _grep(root: str, tree: Tree) -> None:
    out = subprocess.run(
        ["grep", "-r", "-l", NEEDLE, "."], cwd=root, capture_output=True, text=True
    )
    if out.returncode not in (0, 1):
        raise WorkloadFailed(f"grep -r failed: {out.stderr.strip()}")
    found = {line.removeprefix("./") for line in out.stdout.splitlines()}
    if found != set(tree.needle_files):
        raise WorkloadFailed(f"grep -r found {len(found)} files, expected {len(tree.needle_files)}")


def _append(root: str, tree: Tree) -> None:
    for rel in tree.files:
        fd = os.open(os.path.join(root, rel), os.O_WRONLY | os.O_APPEND)
        try:
            os.write(fd, APPENDED.encode())
        finally:
            os.close(fd)


APPENDED = "appended line\n"
SAVED = "saved by the editor\n"


def _check_contents(root: str, tree: Tree, phase: str, suffix: str) -> None:
    """Every file holds what was written plus `suffix` (untimed, after `phase`)."""
    wrong = []
    for rel, content in tree.files.items():
        with open(os.path.join(root, rel), encoding="utf-8") as f:
            if f.read() != content + suffix:
                wrong.append(rel)
    if wrong:
        raise WorkloadFailed(
            f"{phase}: {len(wrong)} of {len(tree.files)} files do not hold what was written "
            f"(first: {wrong[0]})"
        )


def _check_append(root: str, tree: Tree) -> None:
    _check_contents(root, tree, "append", APPENDED)


def _check_save(root: str, tree: Tree) -> None:
    _check_contents(root, tree, "save", APPENDED + SAVED)
    for d in tree.dirs:
        swaps = [n for n in os.listdir(os.path.join(root, d)) if n.endswith(".swp")]
        if swaps:
            raise WorkloadFailed(f"save: {d}/{swaps[0]} is still there after the rename")


def _save(root: str, tree: Tree) -> None:
    for rel, content in tree.files.items():
        folder, name = os.path.split(os.path.join(root, rel))
        swap = os.path.join(folder, f".{name}.swp")
        with open(swap, "w", encoding="utf-8") as f:
            f.write(content + APPENDED + SAVED)
            f.flush()
            os.fsync(f.fileno())
        os.rename(swap, os.path.join(folder, name))


def _delete(root: str, tree: Tree) -> None:
    for rel in tree.files:
        os.unlink(os.path.join(root, rel))
    for d in tree.dirs:
        os.rmdir(os.path.join(root, d))
    left = [n for n in os.listdir(root) if not n.startswith(".")]
    if left:
        raise WorkloadFailed(f"delete: still there after unlink: {left[:5]}")


_PHASE_FUNCTIONS: dict[str, Callable[[str, Tree], None]] = {
    "create": _create,
    "stat": _stat,
    "read": _read,
    "grep": _grep,
    "append": _append,
    "save": _save,
    "delete": _delete,
}
_CHECKS: dict[str, Callable[[str, Tree], None]] = {
    "append": _check_append,
    "save": _check_save,
}
"""Checks run untimed after a phase (the other phases check inline, or the next
phase checks them: stat and read check every file create wrote)."""


def run_phases(
    root: str, tree: Tree, cpu: Callable[[], float | None] = lambda: None
) -> tuple[dict[str, float], dict[str, float]]:
    """Run every phase in order on `root` (an empty folder), back to back, each
    checked; seconds per phase, and the CPU seconds `cpu()` counted during each
    (none when it says None)."""
    times: dict[str, float] = {}
    used: dict[str, float] = {}
    for phase in PHASES:
        c0 = cpu()
        t0 = time.perf_counter()
        _PHASE_FUNCTIONS[phase](root, tree)
        times[phase] = time.perf_counter() - t0
        c1 = cpu()
        if c0 is not None and c1 is not None:
            used[phase] = c1 - c0
        check = _CHECKS.get(phase)
        if check is not None:
            check(root, tree)
    return times, used


def count_phases(
    root: str, tree: Tree, take: Callable[[], collections.Counter[str]]
) -> dict[str, dict[str, int]]:
    """Run the workload once more, untimed, asking between phases what the
    filesystem was sent: `take()` returns the requests since its last call, by
    kind; those per phase (never part of a timed round). The untimed checks
    after a phase are not counted."""
    counts: dict[str, dict[str, int]] = {}
    take()
    for phase in PHASES:
        _PHASE_FUNCTIONS[phase](root, tree)
        counts[phase] = dict(sorted(take().items()))
        check = _CHECKS.get(phase)
        if check is not None:
            check(root, tree)
            take()
    return counts
