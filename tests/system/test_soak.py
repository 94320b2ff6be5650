"""Soaks: a writing workload against a store that misbehaves, and against
memfs processes killed again and again. Short in `make test`; `make soak`
runs them long (MEMFS_SOAK_SECONDS, MEMFS_SOAK_KILLS).

- The fault soak: while the store is slow, answers 429/5xx/529, drops
  connections and loses answers after applying them, a workload writes,
  appends, renames and deletes files; syncs run all along. When the faults
  stop and the final sync runs, the store holds exactly what the workload
  left, and no conflict copy was made (there was no other writer).
- The kill soak: every memfs process of the mount is SIGKILLed, again and
  again, while the workload writes and passes run; each time a new mount on
  the same cache takes over. Nothing a returned write() left is lost, and the
  store ends holding exactly what the mount shows.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
import traceback
from pathlib import Path

import pytest

from memfs.testing import FakeStore
from tests.support import conflict_files
from tests.support.faults import FaultProxyProcess

SOAK_SECONDS = float(os.environ.get("MEMFS_SOAK_SECONDS", "12"))
SOAK_KILLS = int(os.environ.get("MEMFS_SOAK_KILLS", "5"))


def stored(server, store_id: str) -> dict[str, str]:
    """Every memory of the store: path -> content."""
    return FakeStore(server, store_id).memories()


def local_files(root: Path) -> dict[str, str]:
    out = {}
    for dirpath, _dirs, files in os.walk(root):
        for f in files:
            if f == ".anthropic-memory-store":
                continue
            p = Path(dirpath) / f
            out["/" + str(p.relative_to(root))] = p.read_text()
    return out


class Workload:
    """Writes, appends, renames and deletes among 30 names, keeping a model of
    what every returned call left (`model`: path -> content) and the names the
    call in progress touches (`inflight`). One file is never deleted (deleting
    everything would be a wipe, which memfs refuses)."""

    def __init__(self, root: Path, seed: int, model: dict[str, str] | None = None) -> None:
        self.root = root
        self.rng = random.Random(seed)
        self.steps = 0
        self.stop = threading.Event()
        self.errors: list[BaseException] = []
        self.model: dict[str, str] = dict(model or {})
        self.inflight: set[str] = set()

    def run(self) -> None:
        try:
            self._write("/keep.md", "always here\n")
            while not self.stop.is_set():
                self.step()
                self.steps += 1
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.errors.append(e)

    def _write(self, rel: str, text: str, mode: str = "w") -> None:
        self.inflight = {rel}
        with open(self.root / rel.lstrip("/"), mode) as f:
            f.write(text)
        self.model[rel] = text if mode == "w" else self.model.get(rel, "") + text
        self.inflight = set()

    def step(self) -> None:
        rng = self.rng
        folder = f"/d{rng.randrange(3)}"
        (self.root / folder.lstrip("/")).mkdir(exist_ok=True)
        rel = f"{folder}/n{rng.randrange(10)}.md"
        action = rng.random()
        if action < 0.5:
            self._write(rel, f"step {self.steps}\n" * rng.randint(1, 20))
        elif action < 0.7 and rel in self.model:
            self._write(rel, f"appended at {self.steps}\n", "a")
        elif action < 0.85 and rel in self.model:
            target_folder = f"/d{rng.randrange(3)}"
            (self.root / target_folder.lstrip("/")).mkdir(exist_ok=True)
            target = f"{target_folder}/n{rng.randrange(10)}.md"
            self.inflight = {rel, target}
            os.replace(self.root / rel.lstrip("/"), self.root / target.lstrip("/"))
            self.model[target] = self.model.pop(rel)
            self.inflight = set()
        elif rel in self.model:
            self.inflight = {rel}
            os.unlink(self.root / rel.lstrip("/"))
            del self.model[rel]
            self.inflight = set()


def _syncing(mounter, path: Path, stop: threading.Event) -> None:
    while not stop.is_set():
        mounter.sync(path, check=False)
        time.sleep(0.3)


@pytest.mark.slow
def test_fault_soak_the_store_ends_holding_what_the_workload_left(mounter, memfs_server):
    store_id = memfs_server.create_store("fault soak")["id"]
    with FaultProxyProcess(memfs_server.url, seed=11) as proxy:
        path = mounter.mount_one(
            store_id, extra=("--api-url", proxy.url, "--final-sync-timeout", "60")
        )
        work = Workload(path, seed=5)
        syncs_stop = threading.Event()
        threads = [
            threading.Thread(target=work.run),
            threading.Thread(target=_syncing, args=(mounter, path, syncs_stop)),
        ]
        for t in threads:
            t.start()
        statuses = [429, 500, 502, 503, 529]
        deadline = time.monotonic() + SOAK_SECONDS
        i = 0
        while time.monotonic() < deadline:
            proxy.set(
                delay=random.choice([0.0, 0.005, 0.02]),
                status=statuses[i % len(statuses)],
                status_rate=0.15,
                retry_after=0.05,
                drop_rate=0.05,
                lose_answer_rate=0.1,
            )
            i += 1
            time.sleep(0.5)
        work.stop.set()
        syncs_stop.set()
        for t in threads:
            t.join(60)
        assert not work.errors, "".join(traceback.format_exception(work.errors[0]))
        counters = proxy.state()["counters"]
        proxy.reset()
        expected = local_files(path)
        assert expected == work.model
        r = mounter.unmount(path, check=False)
        for _ in range(5):
            if r.returncode == 0:
                break
            # The end of a session sends at most one pass's cap of deletes: the held
            # ones are named, and each next mount of the store with this cache sends more.
            left = [line.rsplit(": ", 1)[1] for line in r.stderr.splitlines()]
            assert left and all(p.endswith(" (deleted)") for p in left), r.stderr[-3000:]
            path = mounter.mount_one(
                store_id, extra=("--api-url", proxy.url, "--final-sync-timeout", "60")
            )
            r = mounter.unmount(path, check=False)
        assert r.returncode == 0, r.stderr[-3000:]
    assert stored(memfs_server, store_id) == expected
    assert conflict_files(mounter.cache_dir / store_id / "conflicts") == []
    faulted = counters["statuses_injected"] + counters["drops_injected"] + counters["answers_lost"]
    print(
        f"fault soak: {work.steps} steps, {counters['requests_seen']} requests, "
        f"{counters['statuses_injected']} error answers, {counters['drops_injected']} drops, "
        f"{counters['answers_lost']} answers lost"
    )
    assert work.steps > 50 and faulted > 10


@pytest.mark.slow
def test_kill_soak_a_new_mount_after_every_kill_loses_nothing(mounter, memfs_server):
    store_id = memfs_server.create_store("kill soak")["id"]
    rng = random.Random(3)
    kills = 0
    model: dict[str, str] = {}
    for round_no in range(SOAK_KILLS):
        path = mounter.mount_one(store_id, extra=("--sync-interval", "5"))
        work = Workload(path, seed=round_no, model=model)
        syncs_stop = threading.Event()
        threads = [
            threading.Thread(target=work.run),
            threading.Thread(target=_syncing, args=(mounter, path, syncs_stop)),
        ]
        for t in threads:
            t.start()
        time.sleep(rng.uniform(0.3, 1.5))
        for pid in mounter.store_pids():
            os.kill(pid, signal.SIGKILL)
            kills += 1
        work.stop.set()
        syncs_stop.set()
        for t in threads:
            t.join(60)
        # The workload only meets errors once the mount is dead.
        assert all(isinstance(e, OSError) for e in work.errors), work.errors
        # The next mount (same cache) shows every returned call's result; the
        # call the kill cut short may have happened or not.
        path = mounter.mount_one(store_id, extra=("--sync-interval", "5"))
        now = local_files(path)
        for rel in (set(now) | set(work.model)) - work.inflight:
            assert now.get(rel) == work.model.get(rel), (round_no, rel)
        model = now
        mounter.unmount(path, check=False)  # a clean stop now and then, too
    path = mounter.mount_one(store_id)
    expected = local_files(path)
    assert expected == model
    assert mounter.unmount(path).returncode == 0
    assert stored(memfs_server, store_id) == expected
    print(f"kill soak: {SOAK_KILLS} rounds, {kills} processes killed")
    assert kills >= SOAK_KILLS
