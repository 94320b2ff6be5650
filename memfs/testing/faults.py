"""`python -m memfs.testing.faults --target URL`: the fault proxy as a process (docs/testing.md,
"Other languages"): its URL on the first line of stdout, then it serves until SIGTERM or SIGINT."""

from __future__ import annotations

import argparse
import signal
import sys

import trio

from ._proxy import FaultProxy


async def _serve(args: argparse.Namespace) -> None:
    proxy = FaultProxy(args.target, host=args.host, port=args.port, seed=args.seed)
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:
            url = await nursery.start(proxy.serve)
            print(url, flush=True)
            async for _ in signals:
                nursery.cancel_scope.cancel()
                break


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m memfs.testing.faults",
        description="An HTTP proxy that makes a Memory Store API misbehave on purpose.",
    )
    parser.add_argument("--target", required=True, help="URL of the server to forward to")
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on")
    parser.add_argument("--port", type=int, default=0, help="port to listen on (0: a free one)")
    parser.add_argument("--seed", type=int, default=None, help="seed for the fault dice")
    trio.run(_serve, parser.parse_args(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
