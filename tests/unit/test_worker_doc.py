"""docs/worker.md says what memfs does: what it says of the credentials'
order is what `resolve_credentials` does, its console transcript shows
`memfs status` as memfs prints it (nothing cut: a mount path longer than the
MOUNT column stands whole on a line of its own), and its recipes word a
failed save as the SDK's own memory sync does."""

from __future__ import annotations

import base64
import json
import re
from pathlib import Path

from anthropic.lib.tools._memories import NOT_CONFIRMED, NOT_SAVED

from memfs.supervisor import resolve_credentials

DOC = Path(__file__).resolve().parents[2] / "docs" / "worker.md"


def _secret(token: str) -> str:
    return base64.urlsafe_b64encode(json.dumps({"sessions_token": token}).encode()).decode()


def _flat(text: str) -> str:
    return re.sub(r"\s+", " ", text)


def test_what_the_page_says_of_memfs_token_and_the_work_items_secret_holds():
    doc = _flat(DOC.read_text())
    assert "outrank the work item's secret" not in doc
    assert "the work item's secret outranks `MEMFS_TOKEN`" in doc
    assert "would outrank a secret given in `MEMFS_WORK_ITEM_SECRET`" in doc
    env = {"MEMFS_TOKEN": "admin-token"}
    from_item = resolve_credentials(
        api_url="http://x", env=env, work_item_secret=_secret("sessions"), for_session=True
    )
    assert from_item is not None and from_item.token == "sessions"
    env["MEMFS_WORK_ITEM_SECRET"] = _secret("sessions")
    from_env = resolve_credentials(api_url="http://x", env=env, for_session=True)
    assert from_env is not None and from_env.token == "admin-token"


def test_the_pages_status_transcripts_cut_no_mount_path():
    doc = DOC.read_text()
    blocks = re.findall(r"```console\n(.*?)```", doc, re.S)
    assert blocks
    mounts = 0
    for block in blocks:
        lines = block.splitlines()
        for line, below in zip(lines, [*lines[1:], ""], strict=True):
            assert "…" not in line, line
            # `memfs status` gives a mount path a line of its own, whole, above its row.
            if line.startswith("/mnt/memory/"):
                assert re.match(r"(rw|ro) +\d+ ", below), (line, below)
                mounts += 1
    assert mounts >= 5, "the transcripts show the status of the session's stores"


def test_the_recipes_word_a_failed_save_as_the_sdks_memory_sync():
    doc = DOC.read_text()
    for language, first_line in (("python", "# worker.py"), ("ts", "// worker.ts")):
        (block,) = (
            b
            for b in re.findall(rf"```{language}\n(.*?)```", doc, re.S)
            if b.startswith(first_line)
        )
        assert NOT_SAVED in block, language
        assert NOT_CONFIRMED in block, language
