"""The fault proxy of memfs's own tests: the public one of `memfs.testing`
(docs/testing.md), under the names these tests have always imported.
`python -m tests.support.faults` still runs it as a process."""

from __future__ import annotations

import sys

from memfs.testing import FaultCounters, FaultProxy, FaultProxyProcess, FaultSettings
from memfs.testing._proxy import CONTROL_PATH
from memfs.testing.faults import main

__all__ = [
    "CONTROL_PATH",
    "FaultCounters",
    "FaultProxy",
    "FaultProxyProcess",
    "FaultSettings",
    "main",
]

if __name__ == "__main__":
    sys.exit(main())
