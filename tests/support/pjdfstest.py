"""pjdfstest inside a mount: build it, run test files, read their TAP, and say
which documented refusal each failing subtest comes from.

pjdfstest (BSD licence, in no package registry) is built by
`scripts/pjdfstest.sh` into the git-ignored `build/pjdfstest`. Each test file
runs in a fresh folder of its own under the mount, traced (`sh -x`), so that
every failing subtest can be traced back to the operation it tried and the
names it touched:

- a failing `symlink`, `link`, `mknod`, `mkfifo` or `bind` is the refusal of
  that kind of file (EPERM in docs/semantics.md), and the names it would have
  made are marked with it;
- a failing subtest that touches a marked name fails because of that mark
  (the file it expected was never made), and marks the names it touches;
- a name made successfully loses its mark.

What cannot be derived so (checks of times without a named operation, the
size limit) is written by hand in the expected-failures file.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = ROOT / "scripts" / "pjdfstest.sh"
ABSENT = 3
"""The build script's exit status when no tarball is found."""

CATEGORIES = (
    "open",
    "mkdir",
    "rmdir",
    "rename",
    "truncate",
    "ftruncate",
    "unlink",
    "chmod",
    "utimensat",
    "chown",
)
"""The categories memfs is measured on: the issue's nine, and chown now that it works."""

_REFUSED_OPS = {
    "symlink": "symlink",
    "link": "hard link",
    "mkfifo": "FIFO",
    "bind": "socket",
    "connect": "socket",
}
_CREATING_OPS = {"create", "mkdir", "mkfifo", "mknod", "symlink", "link", "bind"}
_EXPECT = re.compile(r"^\++ expect (.*)$")
_RESULT = re.compile(r"^(ok|not ok) (\d+)(.*)$")
_PLAN = re.compile(r"^1\.\.(\d+)")
_CALL = re.compile(r"^\++ \S*/pjdfstest (.*)$")
_LN_FAILED = re.compile(r"^ln: failed to create symbolic link '([^']+)'")
LONG_PATH = 1024 - 64
"""Operands longer than this pass memfs's 1,024-byte path limit once under the
test's folder in the mount."""


class PjdfstestAbsent(Exception):
    """No tarball to build pjdfstest from."""


def build() -> Path:
    """The folder of the built pjdfstest (its binary and `tests/`); builds it
    once per tarball. Raises PjdfstestAbsent when there is no tarball."""
    r = subprocess.run(["bash", str(BUILD_SCRIPT)], capture_output=True, text=True, timeout=600)
    if r.returncode == ABSENT:
        raise PjdfstestAbsent(r.stderr.strip())
    if r.returncode != 0:
        raise RuntimeError(f"building pjdfstest failed:\n{r.stderr}")
    return Path(r.stdout.strip().splitlines()[-1])


@dataclass
class Subtest:
    key: str
    """`category/NN.t:N`."""
    ok: bool
    message: str
    reason: str | None = None
    """The documented refusal a failure comes from, when it can be derived."""


@dataclass
class FileRun:
    name: str
    subtests: list[Subtest]
    seconds: float


def test_files(suite: Path, selection: Iterable[str]) -> list[str]:
    """`category/NN.t` for every file of the selection (a category, or one file)."""
    out: list[str] = []
    for item in selection:
        if item.endswith(".t"):
            out.append(item)
        else:
            out += [
                f"{item}/{t}"
                for t in sorted(os.listdir(suite / "tests" / item))
                if t.endswith(".t")
            ]
    return out


def run_files(suite: Path, files: list[str], mount: Path, *, workers: int = 4) -> list[FileRun]:
    """Run each test file in a fresh folder of `mount` (as root), `workers` at a time
    (the files sleep to see times change, so a few at once wait less)."""
    with ThreadPoolExecutor(workers) as pool:
        return list(pool.map(lambda f: _run_file(suite, f, mount), files))


def _run_file(suite: Path, name: str, mount: Path) -> FileRun:
    folder = mount / f"pjd-{name.replace('/', '-')}-{uuid.uuid4().hex[:6]}"
    folder.mkdir()
    started = time.monotonic()
    with tempfile.TemporaryFile("w+") as out:
        subprocess.run(
            ["sh", "-x", str(suite / "tests" / name)],
            cwd=folder,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            timeout=900,
            env={**os.environ, "LC_ALL": "C"},
        )
        out.seek(0)
        lines = out.read().splitlines()
    return FileRun(name, parse(name, lines), time.monotonic() - started)


def parse(name: str, lines: list[str]) -> list[Subtest]:
    """The subtests of one traced run: each result, with its reason derived from
    the operation it tried and the marks of the names it touched."""
    plan = 0
    results: dict[int, Subtest] = {}
    marks: dict[str, str] = {}
    expect_args: list[str] | None = None
    touched: list[str] = []
    """Names the script's own calls of pjdfstest touched since the last result."""
    previous: Subtest | None = None
    for line in lines:
        m = _PLAN.match(line)
        if m:
            plan = int(m.group(1))
            continue
        m = _EXPECT.match(line)
        if m:
            expect_args = m.group(1).split()
            continue
        m = _LN_FAILED.match(line)
        if m:
            marks[m.group(1)] = "symlink"
            continue
        m = _CALL.match(line)
        if m and expect_args is None:
            touched += [w for w in m.group(1).split() if _is_name(w)]
            continue
        m = _RESULT.match(line)
        if not m:
            continue
        # TAP: a failing TODO subtest (pjdfstest marks so where Linux differs from
        # POSIX on purpose) is not a failure.
        number, ok = int(m.group(2)), m.group(1) == "ok" or "# TODO" in m.group(3)
        sub = Subtest(f"{name}:{number}", ok, line)
        if expect_args is not None:
            sub.reason = _follow(expect_args, ok, marks, line)
        elif not ok:
            # A check of values read before (times, mostly): what those reads touched,
            # else what made the subtest just before fail.
            sub.reason = next((r for n in touched if (r := _mark_of(n, marks))), None)
            if sub.reason is None and previous is not None and not previous.ok:
                sub.reason = previous.reason
        expect_args, touched, previous = None, [], sub
        results.setdefault(number, sub)
    subtests = []
    for n in range(1, plan + 1):
        subtests.append(results.get(n) or Subtest(f"{name}:{n}", False, "missing", None))
    return subtests


def _follow(args: list[str], ok: bool, marks: dict[str, str], result: str) -> str | None:
    """Update the marks with one `expect` (its expected value first) and return
    the reason of its failure, if it failed and a reason can be derived."""
    words = args[1:]
    while len(words) >= 2 and words[0] in ("-u", "-g", "-U"):
        words = words[2:]
    if not words:
        return None
    op, operands = words[0], words[1:]
    names = [w for w in operands if _is_name(w)]
    made = _made_by(op, operands)
    if ok and args[0] != "0":
        return None  # an expected refusal: nothing was made or moved
    if ok:
        if op == "rename" and len(names) >= 2:
            mark = marks.pop(names[0], None)
            if mark:
                marks[names[1]] = mark
            else:
                marks.pop(names[1], None)
        elif made:
            marks.pop(made, None)
        return None
    reason = _REFUSED_OPS.get(op)
    if op == "mknod":
        reason = "FIFO" if operands[1:2] == ["f"] else "mknod"
    if reason is None and any(len(n.encode()) > LONG_PATH for n in names):
        reason = "path over 1,024 bytes"
    if reason is None and result.endswith("got EFBIG"):
        reason = "content over 102,400 bytes"
    if reason is None:
        reason = next((r for n in names if (r := _mark_of(n, marks))), None)
    if reason is None:
        # A folder that was to hold a file never made (rmdir of a folder that
        # should not be empty).
        reason = next((r for n in names for k, r in marks.items() if k.startswith(n + "/")), None)
    if reason is not None:
        for n in names:
            marks[n] = reason
    return reason


def _mark_of(name: str, marks: dict[str, str]) -> str | None:
    """The mark of a name or of a folder on its path."""
    parts = name.split("/")
    for i in range(len(parts), 0, -1):
        mark = marks.get("/".join(parts[:i]))
        if mark:
            return mark
    return None


def _is_name(word: str) -> bool:
    return "pjdfstest_" in word or len(word) >= 64


def _made_by(op: str, operands: list[str]) -> str | None:
    if op in ("symlink", "link"):
        return operands[1] if len(operands) > 1 else None
    if op in _CREATING_OPS and operands:
        return operands[0]
    if op == "open" and len(operands) > 1 and "O_CREAT" in operands[1]:
        return operands[0]
    return None


# ------------------------------------------------------- expected failures


def read_expected(path: Path) -> dict[str, str]:
    """`category/NN.t:N  reason` lines (# comments, blank lines) as {key: reason}."""
    out: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        key, _, reason = line.partition(" ")
        out[key] = reason.strip()
    return out


def format_failures(runs: list[FileRun]) -> str:
    """The failing subtests as expected-failures lines, with derived reasons
    (`?` where none can be derived: a bug, or a reason to write by hand)."""
    lines = []
    for run in runs:
        for s in run.subtests:
            if not s.ok:
                lines.append(f"{s.key}  {s.reason or '?'}  # {s.message[:150]}")
    return "\n".join(lines) + "\n"
