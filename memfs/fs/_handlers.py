"""How every FUSE handler of a mount is wrapped, and what the mount counts of them.

What is promised:

- Nothing but `pyfuse3.FUSEError` leaves a wrapped handler: any other
  exception is answered with the errno `errno_for` gives it (EIO, logged with
  its traceback, for a bug), so one bad request never ends the mount.
- Every request is counted and timed under its handler's name
  (`RequestTimes`), refused ones included: `memfs status` shows what the
  kernel did not cache.
- A handler that refuses whatever it is asked is declared as `Refused`, with
  its errno, in the class body: named, counted and timed like any other.
"""

from __future__ import annotations

import functools
import time
import types
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, NoReturn, Protocol, TypeVar, overload

import pyfuse3

from .._histogram import FUSE_BUCKETS, Histogram
from ._errno import errno_for

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])

HANDLER_NAMES: set[str] = set()
"""The name of every handler `handler` wrapped: each mount keeps a histogram of each."""


class RequestTimes:
    """The requests one mount answered: when the latest came, and how long
    each kind took, by handler in the order `operations` defines them."""

    def __init__(self, operations: type) -> None:
        self.last = 0.0
        """time.perf_counter() when the latest request came."""
        self.by_handler = {
            name: Histogram(FUSE_BUCKETS) for name in vars(operations) if name in HANDLER_NAMES
        }


class Handled(Protocol):
    """What the wrapping needs of the Operations whose handlers it wraps."""

    times: RequestTimes
    read_only: bool


def handler(fn: F) -> F:
    """Wrap a handler so that nothing but FUSEError leaves it, and time it."""

    name = fn.__name__
    HANDLER_NAMES.add(name)
    clock = time.perf_counter

    @functools.wraps(fn)
    async def wrapper(self: Handled, *args: Any) -> Any:
        times = self.times
        times.last = started = clock()
        try:
            return await fn(self, *args)
        except pyfuse3.FUSEError:
            raise
        except Exception as e:  # noqa: BLE001 - the mount must survive any bug
            raise pyfuse3.FUSEError(errno_for(e)) from None
        finally:
            times.by_handler[name].observe(clock() - started)

    return wrapper  # type: ignore[return-value]


RefusingHandler = Callable[..., Coroutine[Any, Any, NoReturn]]


class Refused:
    """A handler that refuses every request: with `code`, or on a read-only
    store with `read_only_code` when one is given."""

    def __init__(self, code: int, *, read_only_code: int | None = None) -> None:
        self.code = code
        self.read_only_code = code if read_only_code is None else read_only_code

    def __set_name__(self, owner: type, name: str) -> None:
        code, read_only_code = self.code, self.read_only_code

        async def refuse(fs: Handled, *args: Any) -> NoReturn:
            raise pyfuse3.FUSEError(read_only_code if fs.read_only else code)

        refuse.__name__ = refuse.__qualname__ = name
        self._handler = handler(refuse)

    @overload
    def __get__(self, fs: None, owner: type) -> Refused: ...
    @overload
    def __get__(self, fs: Handled, owner: type) -> RefusingHandler: ...
    def __get__(self, fs: Handled | None, owner: type) -> Refused | RefusingHandler:
        if fs is None:
            return self
        return types.MethodType(self._handler, fs)
