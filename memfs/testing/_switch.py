"""The `pytest11` entry point, which pytest loads in every project that
installs memfs: the `--memfs` flag and the `memfs` setting, either of which
registers the `memfs.testing` plugin; nothing else."""

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
