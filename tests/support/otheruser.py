"""Running a command as another user (`nobody`), as an agent beside a root
memfs would: through `setpriv`, so its uid, gid and groups are that user's
alone and it has no capabilities.

The test's own Python must be runnable by that user. When a folder on its
way is closed to others (pyenv under a 0700 `/root`), the command runs in a
private mount namespace (`unshare --mount`) where that one folder is a
tmpfs others may pass through, with the interpreter's own folder bound back
inside it: nothing else changes, and the namespace ends with the command.
"""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

NOBODY = 65534


def _closed_folder(path: str) -> tuple[str, str] | None:
    """(a folder others cannot pass through on the way to `path`, its child on that way)."""
    parts = Path(path).parts
    for i in range(1, len(parts) - 1):
        folder = os.path.join(*parts[: i + 1])
        if not os.stat(folder).st_mode & stat.S_IXOTH:
            return folder, parts[i + 1]
    return None


def available() -> str | None:
    """Why commands cannot be run as another user here, or None when they can."""
    if os.geteuid() != 0:
        return "needs root"
    for tool in ("setpriv", "unshare", "mount"):
        if shutil.which(tool) is None:
            return f"needs {tool}"
    return None


def run_as_other(
    argv: list[str],
    *,
    env: dict[str, str] | None = None,
    uid: int = NOBODY,
    timeout: float = 60,
) -> subprocess.CompletedProcess[str]:
    """`argv` run as `uid` (its gid the same, no other groups), from `/`."""
    drop = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--", *argv]
    env = env if env is not None else {"PATH": "/usr/bin:/bin", "HOME": "/"}
    closed = _closed_folder(os.path.realpath(sys.executable))
    if closed is None:
        return subprocess.run(
            drop, capture_output=True, text=True, env=env, cwd="/", timeout=timeout
        )
    folder, child = closed
    inside = os.path.join(folder, child)
    with tempfile.TemporaryDirectory(prefix="memfs-other-") as hold:
        script = (
            f"mount --bind {shlex.quote(inside)} {shlex.quote(hold)} && "
            f"mount -t tmpfs -o mode=0711,size=1m memfs-other {shlex.quote(folder)} && "
            f"mkdir {shlex.quote(inside)} && "
            f"mount --bind {shlex.quote(hold)} {shlex.quote(inside)} && "
            'exec "$@"'
        )
        return subprocess.run(
            ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh", *drop],
            capture_output=True,
            text=True,
            env=env,
            cwd="/",
            timeout=timeout,
        )
