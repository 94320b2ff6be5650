"""memfs.testing: a fake Memory Store server and a fault proxy, for tests.

`ServerProcess` runs `memfs serve` on a free port with its own database;
`FaultProxy` (in a trio program) and `FaultProxyProcess` (a child process)
put latency, 429/5xx/529 answers, dropped connections and answers lost
after the store applied them between a program and the store
(`FaultSettings`), and count what they saw (`FaultCounters`). memfs's own
tests use them; they are public so that other projects' tests can too.
They are imported on first use.

Nothing in memfs imports this package (an import-linter contract says so):
it is tooling on top of memfs, made of the parts memfs's own tests use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._processes import FaultProxyProcess, ServerProcess, api_headers
    from ._proxy import FaultCounters, FaultProxy, FaultSettings

__all__ = [
    "FaultCounters",
    "FaultProxy",
    "FaultProxyProcess",
    "FaultSettings",
    "ServerProcess",
    "api_headers",
]

_HOMES = {
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
