"""A store process's start (memfs._startup's tricks 4 and 5): what it goes
without, and that what it goes without is still there for what asks later.

Each check runs in an interpreter of its own, started as a store process
starts (`python -m memfs.mount` imports in this order)."""

from __future__ import annotations

import json
import subprocess
import sys

STORE_START = """
import json, sys
from memfs._startup import pyfuse3_without_metadata, skip_httpx_cli, skip_unused_modules
skip_httpx_cli()
skip_unused_modules()
with pyfuse3_without_metadata():
    import memfs.mount._process
loaded = sorted(m for m in ("importlib.metadata", "h2", "bz2", "lzma") if sys.modules.get(m))
import importlib.metadata, pyfuse3, shutil
print(json.dumps({
    "loaded": loaded,
    "pyfuse3": importlib.metadata.version("pyfuse3"),
    "archives": sorted(name for name, _ in shutil.get_archive_formats()),
}))
"""


def test_a_store_process_loads_no_http2_compression_or_package_metadata():
    done = subprocess.run(
        [sys.executable, "-c", STORE_START], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["loaded"] == []
    # Asked for after the start, the real package metadata answers.
    assert seen["pyfuse3"][0].isdigit()
    # shutil goes on without the compressions it treats as optional; httpcore
    # without h2 speaks HTTP/1.1, as every mount test's store process does.
    assert "gztar" in seen["archives"] and "bztar" not in seen["archives"]
