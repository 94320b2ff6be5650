"""Fails an in-process test on a WARNING or ERROR from memfs that it did not expect.

A warning is memfs telling an operator that something went wrong; in a test
that did not set out to provoke it, it is a bug the assertions did not look
for (the idea is s3ql's tests/pytest_checklogs.py). The tiers whose code under
test runs in this process (tests/unit, tests/inprocess) make `expect_log`
autouse in their conftest: every record at WARNING or above from a `memfs`
logger, during the test's setup, call or teardown, fails the test unless the
test declared it::

    def test_conflict(expect_log):
        expect_log("memfs.sync", "conflict on /c.md")

A declaration is an assertion too: a declared record that never came fails
the test, and `count=` pins how many came. Tiers whose memfs runs in
subprocesses (a mount, `memfs serve`) read those processes' logs instead.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

WATCHED = "memfs"
"""The logger whose records (its children's included) are checked."""


@dataclass
class Expected:
    logger: str
    substring: str
    level: int | None
    count: int | None
    seen: int = 0

    def matches(self, record: logging.LogRecord) -> bool:
        in_logger = record.name == self.logger or record.name.startswith(self.logger + ".")
        level_ok = self.level is None or record.levelno == self.level
        return in_logger and level_ok and self.substring in record.getMessage()

    def __str__(self) -> str:
        level = logging.getLevelName(self.level) if self.level is not None else "WARNING+"
        return f"{level} from {self.logger} containing {self.substring!r}"


class LogCheck(logging.Handler):
    """Collects memfs's WARNING and ERROR records; `check(...)` declares one expected."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []
        self.expected: list[Expected] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.WARNING:
            self.records.append(record)

    def __call__(
        self,
        logger: str,
        substring: str,
        *,
        level: int | None = None,
        count: int | None = None,
    ) -> None:
        """Expect records from `logger` (or a child) whose message holds `substring`:
        at least one, or exactly `count`; at `level` when given, else any level
        from WARNING up."""
        self.expected.append(Expected(logger, substring, level, count))

    def problems(self) -> list[str]:
        """What fails the test: records nobody expected, expectations not met."""
        unexpected = []
        for record in self.records:
            matching = [e for e in self.expected if e.matches(record)]
            for e in matching:
                e.seen += 1
            if not matching:
                unexpected.append(
                    f"unexpected {record.levelname} from {record.name}: {record.getMessage()}"
                )
        unmet = [
            f"expected {'at least one' if e.count is None else e.count} {e}, got {e.seen}"
            for e in self.expected
            if (e.seen == 0 if e.count is None else e.seen != e.count)
        ]
        return unexpected + unmet


@pytest.fixture(autouse=True)
def expect_log() -> Iterator[LogCheck]:
    """Fails the test on a memfs WARNING or ERROR it did not declare; call it to
    declare one (see the module's docstring)."""
    check = LogCheck()
    logger = logging.getLogger(WATCHED)
    level = logger.level
    if logger.getEffectiveLevel() > logging.WARNING:
        logger.setLevel(logging.WARNING)
    logger.addHandler(check)
    try:
        yield check
    finally:
        logger.removeHandler(check)
        logger.setLevel(level)
    problems = check.problems()
    if problems:
        pytest.fail("memfs logged what the test did not expect:\n" + "\n".join(problems))
