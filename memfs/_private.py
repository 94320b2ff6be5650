"""Folders only memfs may write: the cache, the runtime folder.

memfs often runs as root while an agent runs as another user on the same
host. A folder another user can write into could have its entries replaced
(the journal by a symlink to /etc/shadow, say) and turn memfs's own
writes against the host. So every folder memfs keeps state in is checked
before use: it must be a folder (not a symlink), belong to the user memfs
runs as, and be writable by nobody else. Folders memfs creates are 0700
whatever the umask.
"""

from __future__ import annotations

import ctypes
import os
import stat
from typing import Any

from ._exceptions import ConfigError


def ensure_private_dir(path: str, what: str, *, follow: bool = False) -> None:
    """Create `path` (and missing parents) 0700, or check the folder standing there.

    `follow`: a symlink to a checked folder is accepted (for a folder the
    operator named, such as `--cache-dir`); memfs's own subfolders never are.
    Raises ConfigError with one sentence naming the folder and what is wrong.
    """
    try:
        os.makedirs(path, mode=0o700)
        os.chmod(path, 0o700)
    except FileExistsError:
        pass
    except OSError as e:
        raise ConfigError(f"cannot create the {what} {path}: {e.strerror or e}")
    check_private_dir(path, what, follow=follow)


def check_private_dir(path: str, what: str, *, follow: bool = False) -> None:
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except OSError as e:
        raise ConfigError(f"cannot use the {what} {path}: {e.strerror or e}")
    _check(st, path, what)


def _check(st: os.stat_result, path: str, what: str) -> None:
    if stat.S_ISLNK(st.st_mode):
        raise ConfigError(
            f"the {what} {path} is a symlink; memfs uses only real folders of its own"
        )
    if not stat.S_ISDIR(st.st_mode):
        raise ConfigError(f"the {what} {path} is not a folder")
    if st.st_uid != os.geteuid():
        raise ConfigError(
            f"the {what} {path} belongs to another user (uid {st.st_uid}); "
            "memfs uses only folders of its own"
        )
    if st.st_mode & 0o022:
        raise ConfigError(
            f"the {what} {path} can be written by other users "
            f"(mode {stat.S_IMODE(st.st_mode):04o}); make it 0700 or choose another folder"
        )


def open_private_dir(path: str, what: str, *, follow: bool = False) -> int:
    """A descriptor of memfs's own folder (created 0700 when missing), opened
    without following a symlink (`follow`: as `ensure_private_dir`) and
    checked through the descriptor itself: entries are then reached relative
    to it, so a folder swapped afterwards cannot redirect them."""
    ensure_private_dir(path, what, follow=follow)
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except OSError as e:
        raise ConfigError(f"cannot open the {what} {path}: {e.strerror or e}")
    try:
        _check(os.fstat(fd), path, what)
    except ConfigError:
        os.close(fd)
        raise
    return fd


def check_entry_name(name: str) -> str:
    """`name` itself when it names an entry of a folder (no `/`, not `.` or
    `..`, no NUL): what memfs opens relative to a folder's descriptor can
    then only be in that folder."""
    if name in ("", ".", "..") or "/" in name or "\0" in name:
        raise ValueError(f"{name!r} is not the name of an entry of a folder")
    return name


def open_file_at(dir_fd: int, name: str, flags: int, mode: int = 0o600) -> int:
    """Open the entry `name` of the folder `dir_fd` (never through a symlink:
    ELOOP when one stands there), for files memfs keeps in its own folders."""
    return os.open(
        check_entry_name(name), flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=dir_fd
    )


LOG_ROOM = 256 * 1024
"""Bytes past its end a log file keeps allocated: what memfs says about a full
disk (the cache's, which the daemon's log shares) still reaches the log."""

_FALLOC_FL_KEEP_SIZE = 1


def libc_function(name: str, argtypes: list[Any]) -> Any:
    """libc's function `name`, taking `argtypes` and answering an int (-1 and
    errno on failure), or None where libc has no such function."""
    try:
        fn = getattr(ctypes.CDLL(None, use_errno=True), name)
    except (OSError, AttributeError):
        return None
    fn.argtypes = argtypes
    fn.restype = ctypes.c_int
    return fn


def keep_room(fd: int, size: int = LOG_ROOM) -> None:
    """Allocate `size` bytes past the end of the file `fd` without growing it, so
    that appends up to there need no more room on the disk (best effort)."""
    fallocate = libc_function(
        "fallocate", [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    )
    if fallocate is not None:
        fallocate(fd, _FALLOC_FL_KEEP_SIZE, os.fstat(fd).st_size, size)


def open_log_file(path: str, *, follow: bool = False) -> int:
    """A descriptor appending to the log file `path`: its folder is checked as
    memfs's own (`follow`: a folder the operator named, which may be a symlink
    to one) and the file is created 0600 relative to the folder's descriptor,
    never opened through a symlink; it keeps `LOG_ROOM` allocated past its end.
    ConfigError when the folder is not memfs's own; OSError when the file
    cannot be opened."""
    folder, name = os.path.split(path)
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    dir_fd = os.open(folder, flags)
    try:
        _check(os.fstat(dir_fd), folder, "cache folder")
        fd = open_file_at(dir_fd, name, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    finally:
        os.close(dir_fd)
    keep_room(fd)
    return fd
