"""`python -m memfs.mount`: one store process (see `memfs.mount._process`)."""

import contextlib
import errno
import sys

from ._process import main

with contextlib.suppress(KeyboardInterrupt):
    sys.exit(main())
sys.exit(errno.EINTR)
