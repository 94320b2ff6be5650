"""Every refusal docs/semantics.md lists is tested on a real mount (in the
manner of mountpoint-s3's semantics doc test, and of
test_troubleshooting_doc.py here).

The doc's table "What is refused, and with what" is read, not run: each row
must have exactly one case in tests/mount/test_refusals.py (the case's
`row` words stand in the row's first cell, and in no other row's), the
case must expect the row's errno, and each operation the row names in
backticks (`mkdir`, `bind`, `getxattr`...) must be attempted, as the first
word of one of the case's attempts. A case whose row is gone fails too.
"""

from __future__ import annotations

import errno
import re
from pathlib import Path

from tests.mount.test_refusals import REFUSALS

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "semantics.md"
SECTION = "What is refused, and with what"
OPERATION = re.compile(r"`([a-z_]+)(?:\(\))?`")
"""An operation named in backticks: a lowercase call name (`RENAME_EXCHANGE`,
`.anthropic-memory-store` and `O_TRUNC` name a flag or a file, not an operation)."""


def _normal(text: str) -> str:
    return " ".join(text.split())


def refusal_rows() -> list[tuple[str, str]]:
    """(first cell, errno cell) of each row of the section's table."""
    text = DOC.read_text()
    section = text.split(f"\n## {SECTION}\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        if not line.startswith("|"):
            continue
        cells = [_normal(c) for c in line.strip().strip("|").split("|")]
        if cells[0] in ("operation", "---"):
            continue
        rows.append((cells[0], cells[1]))
    return rows


def _cases_of(cell: str) -> list[str]:
    return [name for name, case in REFUSALS.items() if _normal(case.row) in cell]


def test_the_doc_has_its_refusal_table():
    assert len(refusal_rows()) >= 10


def test_every_refusal_the_doc_lists_has_one_case():
    problems = []
    for cell, _ in refusal_rows():
        cases = _cases_of(cell)
        if len(cases) != 1:
            problems.append(f"{cell!r}: cases {cases or 'none'}")
    assert not problems, "rows of docs/semantics.md without one case:\n" + "\n".join(problems)


def test_every_case_is_a_row_of_the_doc():
    cells = [cell for cell, _ in refusal_rows()]
    stale = [name for name, case in REFUSALS.items() if not any(case.row in c for c in cells)]
    assert not stale, f"cases of no row of docs/semantics.md: {stale}"


def test_each_case_expects_the_errno_its_row_gives():
    wrong = {}
    for cell, code in refusal_rows():
        for name in _cases_of(cell):
            if getattr(errno, code.strip("`"), None) != REFUSALS[name].errno:
                wrong[name] = (code, errno.errorcode[REFUSALS[name].errno])
    assert not wrong, f"(the doc's errno, the case's): {wrong}"


def test_each_operation_a_row_names_is_attempted():
    missing = {}
    for cell, _ in refusal_rows():
        for name in _cases_of(cell):
            attempted = {what.split()[0] for what in REFUSALS[name].attempts}
            named = set(OPERATION.findall(cell))
            if named - attempted:
                missing[name] = sorted(named - attempted)
    assert not missing, f"operations a row names that its case does not attempt: {missing}"
