"""The one place memfs's exceptions (and stray OSErrors) become errno values.

What is promised:

- Each refusal of the cache and of the path rules has its errno here, and
  only here.
- EIO, which says nothing a program can act on, is always logged with the
  reason (`io_error`); so is a local OSError, answered with its own errno
  (`local_io_error`). Anything else is a bug: logged with its traceback
  (`handler_bug`) and answered with EIO.
"""

from __future__ import annotations

import errno
import logging

from .. import _exceptions as exc

log = logging.getLogger("memfs.fs")

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
