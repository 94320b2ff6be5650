"""`python -m memfs.mount`: one store process (see `memfs.mount._process`)."""

import contextlib
import errno
import signal
import sys

# A mask of blocked signals survives exec: a store process that a session's
# follower started while `memfs run` held its signals blocked (it takes them
# with sigtimedwait) would never see the SIGTERM that stops it.
signal.pthread_sigmask(signal.SIG_SETMASK, ())

from ._process import main  # noqa: E402

with contextlib.suppress(KeyboardInterrupt):
    sys.exit(main())
sys.exit(errno.EINTR)
