"""`python -m memfs.supervisor._followd`: the session follower of a
`memfs mount --daemon` (`memfs.supervisor._follow`), a process of its own.

It reads its launch (the session, its credentials, the settings of the
stores it mounts, the period) as one line of JSON on stdin, writes the
session's file in the runtime folder, answers `READY` on stdout (or
`ERROR <sentence>`), and follows the session, a trio program, until SIGTERM
or SIGINT: `memfs unmount --all` sends it. Its log goes to
`<cache-dir>/session-<id>.log`.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
from typing import Any

import trio

from .._exceptions import MemfsError
from .._logging import parse_format, parse_level, setup_logging
from ._follow import SessionFollower
from ._session_records import SessionToFollow
from ._supervisor import Supervisor

log = logging.getLogger("memfs.supervisor")


def main() -> int:
    level = os.environ.get("MEMFS_LOG_LEVEL") or "INFO"
    log_format = parse_format(os.environ.get("MEMFS_LOG_FORMAT") or "text")
    setup_logging(parse_level(level), log_format)
    logging.getLogger("httpx").setLevel(logging.WARNING)
    try:
        launch = json.loads(sys.stdin.readline())
        session = SessionToFollow.from_json(launch["session"])
        interval = float(launch["interval"])
    except (ValueError, KeyError, TypeError):
        sys.stdout.write("ERROR the follower's launch line is not one memfs wrote\n")
        return 2
    supervisor = Supervisor([], daemon=True, log_level=level, log_format=log_format)
    follower = SessionFollower(session, supervisor, daemon=True, interval=interval)

    def stop(signum: int, frame: Any) -> None:
        follower.stop_soon()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        follower.write_record()
    except MemfsError as e:
        sys.stdout.write(f"ERROR {e}\n")
        return 1
    sys.stdout.write("READY\n")
    sys.stdout.flush()
    log.info(
        "following session %s: a check every %g s",
        session.session_id,
        interval,
        extra={"event": "session_followed"},
    )
    trio.run(_follow_until_signalled, follower)
    log.info(
        "stopped following session %s; its mounts stay",
        session.session_id,
        extra={"event": "session_unfollowed"},
    )
    return 0


async def _follow_until_signalled(follower: SessionFollower) -> None:
    """Follow until SIGTERM or SIGINT; one that came before this program, to
    the handlers `main` set, has asked the follower to stop already."""
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:

            async def stop_on_signal() -> None:
                async for _ in signals:
                    follower.stop_soon()

            nursery.start_soon(stop_on_signal)
            await follower.follow()
            nursery.cancel_scope.cancel()


if __name__ == "__main__":
    sys.exit(main())
