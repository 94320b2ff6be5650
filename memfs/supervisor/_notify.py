"""systemd's readiness protocol, for a foreground `memfs mount` or `memfs run`
started by a `Type=notify` unit: `READY=1` once every store is mounted,
`STOPPING=1` when the final sync begins.

The protocol is one datagram on the AF_UNIX socket named by
`$NOTIFY_SOCKET` (a path, or an abstract name written with a leading `@`),
so it needs no library. Without the variable nothing is sent; a socket that
cannot be reached is logged and otherwise ignored: the mounts work without it.
`NOTIFY_ENV` is kept out of the store processes' and the command's
environments: readiness is the supervisor's to tell.
"""

from __future__ import annotations

import logging
import os
import socket

from .._children import NOTIFY_ENV

log = logging.getLogger("memfs.supervisor")


def notify(message: str, *, env: dict[str, str] | None = None) -> bool:
    """Send `message` (e.g. `READY=1`) to systemd; True when it was sent."""
    address = (os.environ if env is None else env).get(NOTIFY_ENV, "")
    if not address:
        return False
    if address.startswith("@"):
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC) as s:
            s.connect(address)
            s.sendall(message.encode())
    except OSError as e:
        log.warning(
            "cannot tell systemd %s through $NOTIFY_SOCKET: %s",
            message,
            e.strerror or e,
            extra={"event": "systemd_notify"},
        )
        return False
    return True
