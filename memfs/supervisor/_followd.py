"""`python -m memfs.supervisor._followd`: the session follower of a `memfs
mount --daemon`. It reads the session as a line of JSON on stdin, answers
`READY` (or `ERROR <sentence>`), and follows until SIGTERM or SIGINT.
"""

from __future__ import annotations

import json
import logging
import signal
import sys

import trio

from .._exceptions import MemfsError
from .._logging import setup_logging_from_env
from ._follow import SessionFollower, SessionToFollow
from ._supervisor import Supervisor

log = logging.getLogger("memfs.supervisor")


def main() -> int:
    level, log_format = setup_logging_from_env("INFO")
    try:
        session = SessionToFollow.from_json(json.loads(sys.stdin.readline()))
    except (ValueError, KeyError, TypeError):
        sys.stdout.write("ERROR the follower's launch line is not one memfs wrote\n")
        return 2
    supervisor = Supervisor([], daemon=True, log_level=level, log_format=log_format)
    follower = SessionFollower(session, supervisor)
    # A signal before the trio program's receiver is open asks the follower to stop.
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda signum, frame: follower.stop_soon())
    try:
        follower.write_record()
    except MemfsError as e:
        sys.stdout.write(f"ERROR {e}\n")
        return 1
    print("READY", flush=True)
    log.info(
        "following session %s: a check every %g s",
        session.session_id,
        session.interval,
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
