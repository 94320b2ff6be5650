"""The metrics endpoint of one `memfs mount` or `memfs run`, a process of its own so that it serves
a `--daemon` mount too: Prometheus text for all of its stores, each scrape asking every store over
its control socket. It ends once none of its stores runs."""

from __future__ import annotations

import json
import logging
import signal
import sys
import time
from collections.abc import Iterable, Iterator
from typing import Any

from prometheus_client import start_http_server
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector, CollectorRegistry

from .._exceptions import MemfsError
from .._logging import setup_logging_from_env
from ..control import ControlClient, MetricsReply, StoreState, read_state

log = logging.getLogger("memfs.metrics")

POLL_SECONDS = 2.0


class StoresCollector(Collector):
    """Asks every store of the mount for its numbers at each scrape."""

    def __init__(self, state_files: list[str]) -> None:
        self.state_files = state_files

    def running(self) -> list[StoreState]:
        return [s for s in map(read_state, self.state_files) if s is not None]

    def collect(self) -> Iterator[Metric]:
        samples: list[tuple[str, dict[str, Any]]] = []
        for state in self.running():
            try:
                reply = ControlClient(state).metrics()
            except MemfsError:
                continue
            if isinstance(reply, MetricsReply):
                samples.append((state.store_id, reply.metrics))
        yield from families(samples)


SCALARS: tuple[tuple[type[CounterMetricFamily | GaugeMetricFamily], str, str, str], ...] = (
    (CounterMetricFamily, "store_sent_bytes", "Request bodies sent", "bytes_up"),
    (CounterMetricFamily, "store_received_bytes", "Answer bodies received", "bytes_down"),
    (GaugeMetricFamily, "dirty_files", "Files with changes not yet in the store", "dirty"),
    (
        GaugeMetricFamily,
        "pending_deletes",
        "Files deleted here, not yet in the store",
        "pending_deletes",
    ),
    (GaugeMetricFamily, "refused_files", "Files the store refused or memfs holds back", "refused"),
    (GaugeMetricFamily, "memories", "Files that hold a memory of the store", "memories"),
    (GaugeMetricFamily, "cache_bytes", "Bytes of content in the local cache", "cache_bytes"),
    (CounterMetricFamily, "conflicts", "Conflict copies kept since the mount", "conflicts"),
)
"""One number per store: its family's kind, name and help, and its key in the raw numbers."""


def families(samples: Iterable[tuple[str, dict[str, Any]]]) -> Iterator[Metric]:
    store = ["store_id"]
    passes = CounterMetricFamily(
        "memfs_sync_passes", "Sync passes since the mount, by result", labels=[*store, "result"]
    )
    pass_seconds = HistogramMetricFamily(
        "memfs_sync_pass_duration_seconds", "How long sync passes took", labels=store
    )
    requests = CounterMetricFamily(
        "memfs_store_requests",
        "HTTP requests to the store (attempts), by client call and outcome (status code)",
        labels=[*store, "endpoint", "outcome"],
    )
    scalars = [
        (kind(f"memfs_{name}", text, labels=store), key) for kind, name, text, key in SCALARS
    ]
    fuse = CounterMetricFamily(
        "memfs_fuse_requests",
        "Kernel requests answered, by operation",
        labels=[*store, "operation"],
    )
    fuse_seconds = HistogramMetricFamily(
        "memfs_fuse_request_duration_seconds",
        "How long kernel requests took to answer, by operation",
        labels=[*store, "operation"],
    )
    for store_id, m in samples:
        for result, n in m["passes"].items():
            passes.add_metric([store_id, result], n)
        raw = m["pass_seconds"]
        pass_seconds.add_metric([store_id], [(b, float(n)) for b, n in raw["buckets"]], raw["sum"])
        for r in m["requests"]:
            requests.add_metric([store_id, r["endpoint"], r["outcome"]], r["count"])
        for family, key in scalars:
            family.add_metric([store_id], m[key])
        for op, n in m["fuse_requests"].items():
            fuse.add_metric([store_id, op], n)
        for op, raw in m["fuse_seconds"].items():
            buckets = [(b, float(n)) for b, n in raw["buckets"]]
            fuse_seconds.add_metric([store_id, op], buckets, raw["sum"])
    yield from (passes, pass_seconds, requests, *(family for family, _ in scalars))
    yield from (fuse, fuse_seconds)


def main() -> int:
    """Serve the endpoint; its settings (`addr`, `state_files`) come as JSON on stdin."""
    setup_logging_from_env("WARNING")
    settings = json.loads(sys.stdin.readline())
    host, _, port = settings["addr"].rpartition(":")  # checked by the command line
    collector = StoresCollector(list(settings["state_files"]))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    try:
        start_http_server(int(port), addr=host.strip("[]"), registry=registry)
    except OSError as e:
        print(f"ERROR cannot serve metrics at {settings['addr']}: {e.strerror or e}", flush=True)
        return 1
    print("READY", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    # The stores write their state files as they mount; give them a moment.
    time.sleep(POLL_SECONDS)
    while collector.running():
        time.sleep(POLL_SECONDS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
