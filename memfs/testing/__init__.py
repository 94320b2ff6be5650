"""memfs.testing: a fake Memory Store server for other projects' tests.

A pytest plugin, off unless a project asks for it (docs/testing.md): with
`pytest_plugins = ["memfs.testing"]` in its top conftest.py, `-p
memfs.testing` on the command line, `--memfs`, or `memfs = true` in its
pytest configuration. Then these fixtures exist, all for one test at a time:

- `memfs_server`: a `memfs serve` (`ServerProcess`) on a free port, with a
  fresh database and a random token;
- `memory_store`: a fresh store on it (`FakeStore`: `.url`, `.token`,
  `.store_id`, `.seed({...})`, `.memories()`, `.versions()`);
- `make_memory_store`: more stores, `make_memory_store(name, memories)`;
- `fault_proxy`: a fault proxy (`FaultProxyProcess`) in front of the server:
  latency, 429/5xx/529 answers, dropped connections, answers lost after the
  store applied them (`FaultSettings`), and what it saw (`FaultCounters`).

Installed without being asked for, the plugin adds only the `--memfs` flag
and the `memfs` setting: no fixture, no other hook. The classes are usable
without pytest as well (`FaultProxy` in a trio program of one's own); they
are imported on first use, so the switch pytest loads in every project that
installs memfs costs nothing.

Nothing in memfs imports this package (an import-linter contract says so):
it is tooling on top of memfs, made of the parts memfs's own tests use.

PYTEST_DONT_REWRITE: this module holds no assertion, and pytest's switch has
imported it before the plugin is registered, which pytest would warn about.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

# Registering this module as a pytest plugin (and only that) loads the fixtures.
pytest_plugins = ["memfs.testing._fixtures"]

if TYPE_CHECKING:
    from ._processes import FaultProxyProcess, ServerProcess, api_headers
    from ._proxy import FaultCounters, FaultProxy, FaultSettings
    from ._store import FakeStore

__all__ = [
    "FakeStore",
    "FaultCounters",
    "FaultProxy",
    "FaultProxyProcess",
    "FaultSettings",
    "ServerProcess",
    "api_headers",
]

_HOMES = {
    "FakeStore": "._store",
    "FaultCounters": "._proxy",
    "FaultProxy": "._proxy",
    "FaultProxyProcess": "._processes",
    "FaultSettings": "._proxy",
    "ServerProcess": "._processes",
    "api_headers": "._processes",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'memfs.testing' has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(home, __name__), name)
