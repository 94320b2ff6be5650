"""pjdfstest, the POSIX filesystem test suite, run inside a real memfs mount as
root with `--allow-other` (so that its tests as other users reach the mount),
against a local `memfs serve`.

Every failing subtest must be listed in tests/posix/expected-failures.txt with
the documented refusal it comes from (docs/semantics.md), and every listed one
must still fail: a fix that makes one pass must take its line out. `make test`
runs a fixed subset (`QUICK`); `make posix` (MEMFS_POSIX=all) runs every
category of `CATEGORIES`; MEMFS_POSIX=rename/09.t,chown runs the files and
categories it names. Without the pjdfstest tarball the test is skipped,
saying so; any other trouble building it fails the test.

When the results differ, the whole run's failures are written to
build/pjdfstest/failures.txt, in the file's format, with the reasons that
can be derived (`?` where none can).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.support import pjdfstest

EXPECTED = Path(__file__).resolve().parents[1] / "posix" / "expected-failures.txt"
QUICK = (
    "open",
    "mkdir",
    "rmdir",
    "truncate",
    "ftruncate",
    "unlink",
    "chmod",
    "utimensat",
    "rename/00.t",
    "rename/01.t",
    "rename/02.t",
    "rename/03.t",
    "rename/04.t",
    "rename/05.t",
    "rename/11.t",
    "rename/12.t",
    "rename/13.t",
    "rename/14.t",
    "rename/20.t",
    "rename/21.t",
    "rename/23.t",
    "rename/24.t",
    "chown/00.t",
    "chown/01.t",
    "chown/02.t",
    "chown/03.t",
    "chown/05.t",
    "chown/07.t",
)
"""What `make test` runs: most files, leaving out the slowest of rename and chown
(rename/09.t, rename/10.t: the sticky-folder matrix)."""


@pytest.fixture(scope="module")
def suite() -> Path:
    if os.geteuid() != 0:
        pytest.skip("pjdfstest runs as root (its tests switch to other users)")
    try:
        return pjdfstest.build()
    except pjdfstest.PjdfstestAbsent as e:
        pytest.skip(f"pjdfstest is not run: {e}")


def test_pjdfstest_fails_only_where_a_documented_refusal_says_so(suite, mounter, memfs_server):
    chosen = os.environ.get("MEMFS_POSIX", "")
    if chosen == "all":
        selection: tuple[str, ...] = pjdfstest.CATEGORIES
    elif chosen:
        selection = tuple(chosen.split(","))
    else:
        selection = QUICK
    files = pjdfstest.test_files(suite, selection)
    store_id = memfs_server.create_store("pjdfstest")["id"]
    # No pass during the run: this measures the filesystem, not the sync.
    mnt = mounter.mount_one(store_id, extra=("--allow-other", "--sync-interval", "3600"))
    runs = pjdfstest.run_files(suite, files, mnt)

    expected = {
        key: reason
        for key, reason in pjdfstest.read_expected(EXPECTED).items()
        if key.rsplit(":", 1)[0] in files
    }
    subtests = [s for run in runs for s in run.subtests]
    failed = {s.key: s for s in subtests if not s.ok}
    passed = len(subtests) - len(failed)
    unexpected = sorted(failed.keys() - expected.keys())
    now_pass = sorted(expected.keys() - failed.keys())
    slowest = sorted(runs, key=lambda r: -r.seconds)[:3]
    by_category: dict[str, list[int]] = {}
    for s in subtests:
        counts = by_category.setdefault(s.key.split("/", 1)[0], [0, 0])
        counts[0] += s.ok
        counts[1] += 1
    print(
        "pjdfstest by category: " + ", ".join(f"{c} {p}/{t}" for c, (p, t) in by_category.items())
    )
    print(
        f"pjdfstest: {passed} of {len(subtests)} subtests pass in {len(files)} files; "
        f"slowest {', '.join(f'{r.name} {r.seconds:.0f} s' for r in slowest)}"
    )
    if unexpected or now_pass:
        report = pjdfstest.ROOT / "build" / "pjdfstest" / "failures.txt"
        report.write_text(pjdfstest.format_failures(runs))
        lines = [f"{k}: {failed[k].message[-200:]}" for k in unexpected[:30]]
        pytest.fail(
            f"{len(unexpected)} subtests fail that {EXPECTED.name} does not list, and "
            f"{len(now_pass)} listed ones pass now ({', '.join(now_pass[:10])}); "
            f"this run's failures are in {report}\n" + "\n".join(lines)
        )
