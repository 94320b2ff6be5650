"""The guard of the in-process tiers (tests/support/checklogs.py) on its own:
what it lets through and what it reports."""

from __future__ import annotations

import logging

from tests.support.checklogs import LogCheck


def _record(name: str, level: int, message: str, *args: object) -> logging.LogRecord:
    return logging.LogRecord(name, level, __file__, 1, message, args, None)


def test_an_undeclared_warning_or_error_is_reported_and_info_is_not():
    check = LogCheck()
    for record in (
        _record("memfs.sync", logging.WARNING, "conflict on %s", "/a.md"),
        _record("memfs.fs", logging.ERROR, "unexpected error in a filesystem handler"),
    ):
        check.handle(record)
    check.handle(_record("memfs.sync", logging.INFO, "pass done"))  # below the handler's level
    assert check.problems() == [
        "unexpected WARNING from memfs.sync: conflict on /a.md",
        "unexpected ERROR from memfs.fs: unexpected error in a filesystem handler",
    ]


def test_a_declared_record_passes_and_a_declaration_nothing_met_fails():
    check = LogCheck()
    check("memfs.sync", "conflict on /a.md")
    check("memfs", "never logged")
    check("memfs.sync", "twice", count=1)
    check("memfs.fs", "at error only", level=logging.ERROR)
    check.handle(_record("memfs.sync", logging.WARNING, "conflict on %s", "/a.md"))
    check.handle(_record("memfs.sync.push", logging.WARNING, "twice"))
    check.handle(_record("memfs.sync", logging.WARNING, "twice"))
    check.handle(_record("memfs.fs", logging.WARNING, "at error only"))
    assert check.problems() == [
        "unexpected WARNING from memfs.fs: at error only",
        "expected at least one WARNING+ from memfs containing 'never logged', got 0",
        "expected 1 WARNING+ from memfs.sync containing 'twice', got 2",
        "expected at least one ERROR from memfs.fs containing 'at error only', got 0",
    ]
