"""Folders only memfs may write: the cache, the runtime folder. memfs often runs as root beside an
agent running as another user, who could replace the entries of a folder they may write into (the
journal by a symlink to /etc/shadow) and turn memfs's writes against the host. So every folder memfs
keeps state in is a real folder of its own user that nobody else may write; the folder memfs creates
for it is 0700 (missing parents get the umask's mode)."""

from __future__ import annotations

import ctypes
import os
import stat
from typing import Any

from ._exceptions import ConfigError


def ensure_private_dir(path: str, what: str, *, follow: bool = False) -> None:
    """Create `path` 0700 (missing parents with the umask's mode), or check the folder there;
    ConfigError naming the folder and what is wrong. `follow`: a symlink to a
    checked folder is accepted (a folder the operator named)."""
    try:
        os.makedirs(path, mode=0o700)
        os.chmod(path, 0o700)
    except FileExistsError:
        pass
    except OSError as e:
        raise ConfigError(f"cannot create the {what} {path}: {e.strerror or e}")
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


def open_private_dir(path: str, what: str) -> int:
    """A descriptor of memfs's own folder (as `ensure_private_dir`), checked
    through the descriptor itself: a folder swapped afterwards cannot
    redirect the entries reached relative to it."""
    ensure_private_dir(path, what)
    try:
        fd = _open_dir(path, follow=False)
    except OSError as e:
        raise ConfigError(f"cannot open the {what} {path}: {e.strerror or e}")
    try:
        _check(os.fstat(fd), path, what)
    except ConfigError:
        os.close(fd)
        raise
    return fd


def check_entry_name(name: str) -> str:
    """`name` itself when it can only name an entry of a folder."""
    if name in ("", ".", "..") or "/" in name or "\0" in name:
        raise ValueError(f"{name!r} is not the name of an entry of a folder")
    return name


def open_file_at(dir_fd: int, name: str, flags: int) -> int:
    """Open the entry `name` of the folder `dir_fd` (created 0600), never through a symlink (ELOOP)."""
    return os.open(
        check_entry_name(name), flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=dir_fd
    )


LOG_ROOM = 256 * 1024
"""Bytes a log file keeps allocated past its end, so that a full disk is still logged."""

_FALLOC_FL_KEEP_SIZE = 1


def libc_function(name: str, argtypes: list[Any]) -> Any:
    """libc's function `name` answering an int (-1 and errno on failure), or
    None where libc has none."""
    try:
        fn = getattr(ctypes.CDLL(None, use_errno=True), name)
    except (OSError, AttributeError):
        return None
    fn.argtypes = argtypes
    fn.restype = ctypes.c_int
    return fn


def open_log_file(path: str, *, follow: bool = False) -> int:
    """A descriptor appending to the log file `path`, created 0600 in its
    checked folder (`follow`: as `ensure_private_dir`), never through a
    symlink, with `LOG_ROOM` allocated past its end (best effort)."""
    folder, name = os.path.split(path)
    dir_fd = _open_dir(folder, follow)
    try:
        _check(os.fstat(dir_fd), folder, "cache folder")
        fd = open_file_at(dir_fd, name, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    finally:
        os.close(dir_fd)
    fallocate = libc_function(
        "fallocate", [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
    )
    if fallocate is not None:
        fallocate(fd, _FALLOC_FL_KEEP_SIZE, os.fstat(fd).st_size, LOG_ROOM)
    return fd


def _open_dir(path: str, follow: bool) -> int:
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    return os.open(path, flags)
