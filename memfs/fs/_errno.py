"""The one place memfs's exceptions (and stray OSErrors) become errno values.

Anything unexpected is logged with its traceback and answered with EIO, so
one bad request never ends the mount.
"""

from __future__ import annotations

import errno
import logging

from .. import _exceptions as exc

log = logging.getLogger("memfs.fs")

_ERRNO_BY_CLASS: list[tuple[type[BaseException], int]] = [
    (exc.NoSuchEntry, errno.ENOENT),
    (exc.EntryExists, errno.EEXIST),
    (exc.NotADirectory, errno.ENOTDIR),
    (exc.IsADirectory, errno.EISDIR),
    (exc.DirectoryNotEmpty, errno.ENOTEMPTY),
    (exc.InvalidMove, errno.EINVAL),
    (exc.FileTooLarge, errno.EFBIG),
    (exc.NameTooLong, errno.ENAMETOOLONG),
    (exc.StoreFull, errno.ENOSPC),
    (exc.CacheDiskFull, errno.ENOSPC),
    (exc.InvalidPath, errno.EINVAL),
    (exc.ContentUnavailable, errno.EIO),
    (exc.CacheCorrupt, errno.EIO),
]


def errno_for(e: BaseException) -> int:
    for cls, code in _ERRNO_BY_CLASS:
        if isinstance(e, cls):
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
