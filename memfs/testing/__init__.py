"""memfs.testing: a fake Memory Store server and a fault proxy for other
projects' tests (docs/testing.md), as a pytest plugin and as classes. They
are imported on first use, so that pytest's switch (`_switch`), loaded in
every project that installs memfs, costs nothing.

PYTEST_DONT_REWRITE: this module holds no assertion, and pytest's switch has
imported it before the plugin is registered, which pytest would warn about.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

# Registering this module as a pytest plugin (and only that) loads the fixtures.
pytest_plugins = ["memfs.testing._fixtures"]

if TYPE_CHECKING:
    from ._processes import FakeStore as FakeStore
    from ._processes import FaultProxyProcess as FaultProxyProcess
    from ._processes import ServerProcess as ServerProcess
    from ._processes import api_headers as api_headers
    from ._proxy import FaultCounters as FaultCounters
    from ._proxy import FaultProxy as FaultProxy
    from ._proxy import FaultSettings as FaultSettings

_HOMES = {
    "FakeStore": "._processes",
    "FaultCounters": "._proxy",
    "FaultProxy": "._proxy",
    "FaultProxyProcess": "._processes",
    "FaultSettings": "._proxy",
    "ServerProcess": "._processes",
    "api_headers": "._processes",
}
__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'memfs.testing' has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(home, __name__), name)
