"""The `memfs` entry point of the `pytest11` group: the switch, off by default.

pytest loads this module in every project that installs memfs. It adds the
`--memfs` flag and the `memfs` ini setting and does nothing else unless one
of them is given; then it registers the `memfs.testing` plugin, whose
fixtures appear. `-p memfs.testing` and `pytest_plugins = ["memfs.testing"]`
register the same plugin without the switch (they work with
PYTEST_DISABLE_PLUGIN_AUTOLOAD too). Registering twice is harmless.

It imports nothing of memfs.testing's machinery, so that a project that
does not opt in pays no import and sees no fixture or hook of it.
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
