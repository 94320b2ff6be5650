"""This tier runs memfs's code in the test's own process: a WARNING or ERROR
from memfs that a test did not declare with `expect_log` fails it."""

from tests.support.checklogs import expect_log  # noqa: F401 (an autouse fixture)
