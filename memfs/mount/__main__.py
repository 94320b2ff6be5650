"""`python -m memfs.mount`: one store process (see `memfs.mount._process`)."""

import contextlib
import errno
import signal
import sys

# A mask of blocked signals survives exec: a store process that a session's
# follower started while `memfs run` held its signals blocked (it takes them
# with sigtimedwait) would never see the SIGTERM that stops it.
signal.pthread_sigmask(signal.SIG_SETMASK, ())

# httpx imports its own command line when `rich` and `click` are installed (a
# test venv has them, for import-linter): ~45 ms of every store process's start,
# for a module this process never uses. None in sys.modules makes that import
# fail, and httpx then goes without it.
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]

from ._process import main  # noqa: E402

with contextlib.suppress(KeyboardInterrupt):
    sys.exit(main())
sys.exit(errno.EINTR)
