"""The runtime folder, where store processes and the CLI meet. Each store process leaves there,
named `<store_id>-<hash of the cache folder's real path>`, its control socket `<name>.sock` and its
state file `<name>.json`: written once mounted, rewritten with `"stopping": true` when the final
sync begins, removed last. A state file whose process is gone counts for nothing."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from .._exceptions import MemfsError, MountError
from .._private import open_file_at, open_private_dir
from ..api import check_store_id

STATE_SUFFIX = ".json"
SOCKET_SUFFIX = ".sock"


def runtime_dir() -> str:
    """Where store processes leave their control sockets and state files:
    `$MEMFS_RUNTIME_DIR`, else `/run/memfs` for root, else
    `$XDG_RUNTIME_DIR/memfs`, else `/tmp/memfs-<uid>`."""
    env = os.environ.get("MEMFS_RUNTIME_DIR")
    if env:
        return env
    if os.geteuid() == 0:
        return "/run/memfs"
    xdg = os.environ.get("XDG_RUNTIME_DIR")
    return os.path.join(xdg, "memfs") if xdg else f"/tmp/memfs-{os.getuid()}"


def runtime_name(store_id: str, cache_dir: str) -> str:
    """The same whichever way the folder is spelled; InvalidStoreId for a
    store id not of the API's form."""
    check_store_id(store_id)
    key = hashlib.sha256(os.fsencode(os.path.realpath(cache_dir))).hexdigest()[:12]
    return f"{store_id}-{key}"


def state_path(folder: str, store_id: str, cache_dir: str) -> str:
    return os.path.join(folder, runtime_name(store_id, cache_dir) + STATE_SUFFIX)


def socket_path(folder: str, store_id: str, cache_dir: str) -> str:
    return os.path.join(folder, runtime_name(store_id, cache_dir) + SOCKET_SUFFIX)


SUN_PATH_MAX = 107


@contextlib.contextmanager
def socket_address(path: str) -> Iterator[str]:
    """The path itself, or, when too long for AF_UNIX, the socket's name
    reached through a descriptor of its folder (`/proc/self/fd/N/<name>`)."""
    if len(os.fsencode(path)) <= SUN_PATH_MAX:
        yield path
        return
    folder, name = os.path.split(path)
    fd = os.open(folder, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield f"/proc/self/fd/{fd}/{name}"
    finally:
        os.close(fd)


@dataclass(frozen=True)
class StoreState:
    """What a store process's state file says."""

    store_id: str
    mount_path: str
    pid: int
    socket: str
    stopping: bool = False

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str | bytes) -> StoreState:
        """Raises ValueError when the text is not a state file's."""
        data = json.loads(text)
        try:
            return cls(
                store_id=str(data["store_id"]),
                mount_path=str(data["mount_path"]),
                pid=int(data["pid"]),
                socket=str(data["socket"]),
                stopping=bool(data.get("stopping", False)),
            )
        except (KeyError, TypeError) as e:
            raise ValueError(f"not a state file: {e}") from None


def process_alive(pid: int) -> bool:
    """Whether a process of that pid runs (one this user may signal, not a zombie)."""
    try:
        os.kill(pid, 0)
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    # The state follows the command's name, in parentheses that it may itself hold.
    return stat[stat.rfind(b")") + 2 : stat.rfind(b")") + 3] not in (b"Z", b"X")


def read_state(path: str) -> StoreState | None:
    """The state in `path` when its process is alive, else None."""
    try:
        state = StoreState.from_json(Path(path).read_bytes())
    except (OSError, ValueError):
        return None
    return state if process_alive(state.pid) else None


def running_stores(folder: str | None = None) -> list[StoreState]:
    """The live store processes, by their state files in `folder`, in the
    order of their store ids. MountError when the folder exists but cannot be
    read: saying that none runs would be untrue."""
    folder = runtime_dir() if folder is None else folder
    try:
        names = sorted(os.listdir(folder))
    except (FileNotFoundError, NotADirectoryError):
        return []
    except PermissionError:
        raise MountError(
            f"cannot read the runtime folder {folder}: its memfs mounts belong to another user"
        ) from None
    except OSError as e:
        raise MountError(f"cannot read the runtime folder {folder}: {e.strerror or e}") from None
    states = (read_state(os.path.join(folder, n)) for n in names if n.endswith(STATE_SUFFIX))
    return [s for s in states if s is not None]


class StateFile:
    """A file of the runtime folder that one process keeps for the commands
    to read (a store's state, a followed session's), 0600: written whole (a
    temporary file renamed over it), relative to a checked descriptor of the
    folder."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.folder, self.name = os.path.split(path)
        self._folder_fd: int | None = None

    def write(self, text: str) -> None:
        if self._folder_fd is None:
            self._folder_fd = open_private_dir(self.folder, "runtime folder")
        fd, tmp = self._folder_fd, self.name + ".tmp"
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=fd)  # left by a killed process
        with os.fdopen(open_file_at(fd, tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL), "w") as f:
            f.write(text)
        os.replace(tmp, self.name, src_dir_fd=fd, dst_dir_fd=fd)

    def remove(self) -> None:
        """Remove the file (or one a killed process left), if it can be."""
        if self._folder_fd is None and os.path.lexists(self.folder):
            with contextlib.suppress(MemfsError, OSError):
                self._folder_fd = open_private_dir(self.folder, "runtime folder")
        if self._folder_fd is None:
            return
        with contextlib.suppress(OSError):
            os.unlink(self.name, dir_fd=self._folder_fd)
        os.close(self._folder_fd)
        self._folder_fd = None
