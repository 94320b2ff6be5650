"""How every FUSE handler of a mount is wrapped, and the one place memfs's
exceptions (and stray OSErrors) become errno values.

Nothing but `pyfuse3.FUSEError` leaves a wrapped handler, so one bad request
never ends the mount: EIO, which says nothing a program can act on, is
logged with its reason (`io_error`), a local OSError is answered with its own
errno (`local_io_error`), anything else is a bug, logged with its traceback
(`handler_bug`) and answered with EIO. Every request is counted and timed
under its handler's name, refused ones included.
"""

from __future__ import annotations

import errno
import functools
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pyfuse3

from .. import _exceptions as exc

log = logging.getLogger("memfs.fs")

F = TypeVar("F", bound=Callable[..., Awaitable[Any]])

_CLASSES_BY_ERRNO: dict[int, tuple[type[exc.MemfsError], ...]] = {
    errno.ENOENT: (exc.NoSuchEntry,),
    errno.EEXIST: (exc.EntryExists,),
    errno.ENOTDIR: (exc.NotADirectory,),
    errno.EISDIR: (exc.IsADirectory,),
    errno.ENOTEMPTY: (exc.DirectoryNotEmpty,),
    errno.EINVAL: (exc.InvalidMove, exc.InvalidPath),
    errno.EFBIG: (exc.FileTooLarge,),
    errno.ENAMETOOLONG: (exc.NameTooLong,),
    errno.ENOSPC: (exc.StoreFull, exc.CacheDiskFull),
    errno.EIO: (exc.ContentUnavailable, exc.CacheCorrupt),
}


def errno_for(e: BaseException) -> int:
    """The errno a program gets for `e`, raised in a filesystem handler."""
    for code, classes in _CLASSES_BY_ERRNO.items():
        if isinstance(e, classes):
            if code == errno.EIO:
                log.error("%s", e, extra={"event": "io_error"})
            return code
    if isinstance(e, OSError) and e.errno:
        log.error("local I/O error: %s", e, extra={"event": "local_io_error"})
        return e.errno
    log.error(
        "unexpected error in a filesystem handler", exc_info=e, extra={"event": "handler_bug"}
    )
    return errno.EIO


def handler(fn: F) -> F:
    """Wrap a handler so that nothing but FUSEError leaves it, and time it in
    its Operations' `times`."""
    name = fn.__name__

    @functools.wraps(fn)
    async def wrapper(self: Any, *args: Any) -> Any:
        started = time.perf_counter()
        try:
            return await fn(self, *args)
        except pyfuse3.FUSEError:
            raise
        except Exception as e:  # noqa: BLE001 - the mount must survive any bug
            raise pyfuse3.FUSEError(errno_for(e)) from None
        finally:
            self.times[name].observe(time.perf_counter() - started)

    return wrapper  # type: ignore[return-value]
