"""A histogram cheap enough for every FUSE request, with Prometheus's meaning
(`le`, cumulative when read): only the metrics endpoint imports prometheus-client."""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

FUSE_BUCKETS = (5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 5e-2, 0.25, 1.0, 5.0)
PASS_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)


@dataclass
class Histogram:
    buckets: tuple[float, ...]
    counts: list[int] = field(default_factory=list)
    """Per bucket, not cumulative; one more for +Inf."""
    total: float = 0.0
    count: int = 0

    def __post_init__(self) -> None:
        if not self.counts:
            self.counts = [0] * (len(self.buckets) + 1)

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.buckets, value)] += 1
        self.total += value
        self.count += 1

    def to_json(self) -> dict[str, Any]:
        """Cumulative counts by upper bound ("+Inf" last), the sum and the count."""
        cumulative, running = [], 0
        for bound, n in zip([*map(repr, self.buckets), "+Inf"], self.counts, strict=True):
            running += n
            cumulative.append([bound, running])
        return {"buckets": cumulative, "sum": self.total, "count": self.count}
