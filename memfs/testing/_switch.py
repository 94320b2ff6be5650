"""The `memfs` entry point of the `pytest11` group: the switch, off by default.

pytest loads it in every project that installs memfs. It adds the `--memfs`
flag and the `memfs` setting and nothing else; either registers the
`memfs.testing` plugin. It imports none of memfs.testing's machinery.
"""

from __future__ import annotations

import pytest

PLUGIN = "memfs.testing"


def pytest_addoption(parser: pytest.Parser) -> None:
    help_text = "load memfs.testing's fixtures: a fake Memory Store server and a fault proxy"
    parser.getgroup("memfs").addoption(
        "--memfs", action="store_true", default=False, help=help_text
    )
    parser.addini("memfs", type="bool", default=False, help=help_text)


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("memfs") or config.getini("memfs"):
        config.pluginmanager.import_plugin(PLUGIN)
