"""memfs's start-up tricks, all in one place, each with what it buys.

Most of a cold `memfs mount` is Python starting: the command line's
interpreter, then a store process's (trio, pyfuse3, httpx: ~0.2 s). Each
trick below buys a part of that back (4 and 5 buy memory as well); none
changes what memfs does. The figures are interleaved A/B runs on the 2-core
development machine (with other work on it), each trick off against on,
30-40 runs a side, median: cold `memfs mount --daemon` of a store of the
demo store's size against a local `memfs serve`, named without a mount path
(so the command line looks its name up), until the command returned; `memfs
status` with nothing mounted; `python -m memfs.mount` reading an empty stdin.

1. Store processes started before the command line is read
   (`start_early_stores`, first thing in `memfs.cli.main`): `memfs mount`
   and `memfs run` start one store process per `--store` (one for
   `--resources`, `--work-item` or `--session`), before the rest of memfs
   is imported and before argparse, so that their imports overlap the
   command line's own; the supervisor hands each its spec when it has one
   (`EarlyStores.take`), and those not needed are ended. This reads argv
   before argparse does, only for the command's name, `--store`, `-h`,
   `--help` and `--`. A cold mount of one store: 511 ms with it, 611 ms
   without (-100 ms); of two stores, one per `--store` rather than one in
   all: 368 ms against 442 ms (-74 ms). At most `MAX_STORES_PER_SESSION`
   start: the second and later ones after memfs.api is imported, which
   the first does not wait for.
2. The program's exit without the interpreter's teardown (`exit_now`, the
   end of `memfs.cli.run`), once the logs and what the command printed are
   flushed: nothing the commands hold needs the teardown (they close what
   they open, and store processes are processes of their own). `memfs
   status`: 98 ms against 111 ms (-13 ms); a cold mount: 439 ms against
   475 ms (-36 ms, the exit after READY).
3. httpx without its own command line (`skip_httpx_cli`, in the store
   process and the command line): httpx imports it when `rich` and `click`
   are installed, as they are where the test extras are (import-linter
   brings them); None in `sys.modules` makes that import fail, and httpx
   goes without it. A store process's start: 203 ms against 246 ms
   (-44 ms); a cold mount: 401 ms against 429 ms (-28 ms) for the store
   process's part, and about 27 ms more (by the fastest quarter of the
   runs) for the command line's, which imports httpx to look the store's
   name up. Where `rich` or `click` is missing it buys nothing and costs
   nothing.

4. A store process without what it never uses (`skip_unused_modules`, in
   the store process only): httpcore loads HTTP/2 (h2, hpack, hyperframe)
   whenever h2 is installed, as it may be beside memfs, though memfs's
   client never asks for HTTP/2; shutil
   and zipfile load bz2 and lzma, which they treat as optional. None in
   `sys.modules` makes each import fail, and each goes without, as where
   the module is missing. A store process of 2,000 memories: 1.0-1.2 MiB
   less resident for h2 (45.4 against 44.4 MiB), 0.2 MiB for bz2 and lzma.
5. pyfuse3 without importlib.metadata (`pyfuse3_without_metadata`, around
   the store process's imports): pyfuse3 imports it only to read its own
   version, which memfs never shows, and it brings zipfile, csv, email and
   more. While pyfuse3 is imported, a stand-in answers that its version is
   unknown; it is gone once the imports are done, so whatever asks later
   gets the real module. 1.0 MiB less resident (what a store process's
   imports add: 20,988 KiB without it, 19,992 with it) and 9 ms less to
   start one (163 against 172 ms, medians of 30 interleaved runs of its
   imports).

Tricks 4 and 5, with `memfs.mount._memory`, bring a store process of 2,000
memories under issue 23's 40 MiB (bench/README.md, "A store process's
memory").

One more lives where it must, in a package's `__getattr__`: `import
memfs` loads the exceptions alone, `StoreClient` and the wire types on
first use (memfs/__init__.py), and `import memfs.control` leaves out its
trio server (memfs/control/__init__.py). Loading them at once: `memfs
status` 87 ms against 202 ms (+115 ms: it would load httpx), a cold mount
+121 ms.

Not a trick but a start-up step: a store process clears its signal mask
first (memfs/mount/__main__.py), for its stop to reach it.

This module imports only the standard library (and memfs.api for a mount
of more than one store): it runs before the rest of memfs is imported.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import types
from collections.abc import Iterator, Sequence
from typing import NoReturn

from ._children import STORE_MODULE, child_env, start_process

EARLY_COMMANDS = ("mount", "run")
"""The commands that start store processes."""


def _stores_asked(argv: Sequence[str]) -> int:
    """How many store processes a command line asks for (without the
    program): one per `--store`, one at least for a command that mounts, none
    for the others or when asked for help. The words after `--` are `memfs
    run`'s command, not memfs's."""
    words = list(argv)
    if "--" in words:
        words = words[: words.index("--")]
    command = next((w for w in words if not w.startswith("-")), None)
    if command not in EARLY_COMMANDS or "-h" in words or "--help" in words:
        return 0
    return max(1, sum(w == "--store" or w.startswith("--store=") for w in words))


class EarlyStores:
    """Store processes started before their specs exist, each waiting for its
    launch line; `take` hands one over, or starts one when none is left."""

    def __init__(self, waiting: list[subprocess.Popen[str]] | None = None) -> None:
        self._waiting: list[subprocess.Popen[str]] = waiting or []

    @classmethod
    def for_command(cls, argv: Sequence[str]) -> EarlyStores:
        """As many store processes as `argv` (the command line, without the
        program) asks for, at most `MAX_STORES_PER_SESSION`."""
        early = cls()
        early.start_for(argv)
        return early

    def start_for(self, argv: Sequence[str]) -> None:
        """Start the store processes `argv` asks for: the first at once, the
        others once memfs.api, which says how many a mount may have, is loaded."""
        asked = _stores_asked(argv)
        if not asked:
            return
        self._start(1)
        if asked > 1:
            from .api import MAX_STORES_PER_SESSION

            self._start(min(asked, MAX_STORES_PER_SESSION) - 1)

    def _start(self, n: int) -> None:
        with contextlib.suppress(OSError):
            for _ in range(n):
                self._waiting.append(start_process(STORE_MODULE, child_env()))

    def __len__(self) -> int:
        """How many are waiting."""
        return len(self._waiting)

    def take(self) -> subprocess.Popen[str]:
        """A store process waiting for its launch line."""
        if self._waiting:
            return self._waiting.pop(0)
        return start_process(STORE_MODULE, child_env())

    def close(self) -> None:
        """End the store processes nobody took: they hold nothing yet."""
        while self._waiting:
            proc = self._waiting.pop()
            with contextlib.suppress(OSError):
                proc.kill()
            proc.wait()
            for stream in (proc.stdin, proc.stdout):
                if stream is not None:
                    with contextlib.suppress(OSError):
                        stream.close()


EARLY_STORES = EarlyStores()
"""The store processes this program started at its start (`start_early_stores`);
the supervisor takes its store processes from here unless given others."""


def start_early_stores(argv: Sequence[str]) -> None:
    """Trick 1: the store processes `argv` (without the program) asks for,
    into `EARLY_STORES`; `memfs.cli.main` calls it before anything else."""
    EARLY_STORES.start_for(argv)


def skip_httpx_cli() -> None:
    """Trick 3: httpx, when it is imported, goes without its command line."""
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]


UNUSED_IN_STORES = ("h2", "bz2", "lzma")
"""What a store process never uses, that libraries load when it is there."""


def skip_unused_modules() -> None:
    """Trick 4: a store process goes without `UNUSED_IN_STORES`."""
    for name in UNUSED_IN_STORES:
        sys.modules.setdefault(name, None)  # type: ignore[arg-type]


class _NoMetadata(types.ModuleType):
    """What pyfuse3 takes from importlib.metadata, and nothing else: its own
    version, which it only shows, is "unknown"."""

    class PackageNotFoundError(ModuleNotFoundError):
        pass

    @classmethod
    def version(cls, name: str) -> str:
        raise cls.PackageNotFoundError(name)


@contextlib.contextmanager
def pyfuse3_without_metadata() -> Iterator[None]:
    """Trick 5: what is imported inside finds a stand-in for importlib.metadata,
    and what is imported after it the real one."""
    if "importlib.metadata" in sys.modules:
        yield
        return
    stand_in = _NoMetadata("importlib.metadata")
    sys.modules["importlib.metadata"] = stand_in
    try:
        yield
    finally:
        if sys.modules.get("importlib.metadata") is stand_in:
            del sys.modules["importlib.metadata"]


def exit_now(code: int) -> NoReturn:
    """Trick 2: end the program with `code`, without the interpreter's
    teardown, once the logs and stdout and stderr are flushed."""
    import logging  # loaded by then: the commands log

    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`memfs status | head`)
            pass
    os._exit(code)
