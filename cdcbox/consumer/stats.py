"""How each record ended, counted: nothing vanishes, every record has exactly one outcome.

The counts are kept in memory (what tests, the demo and benchmarks read) and mirrored to
the consumer's Prometheus metrics.
"""

from __future__ import annotations

import enum
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

from cdcbox.consumer.metrics import ConsumerMetrics

_MAX_SAMPLES = 200_000


class Outcome(enum.Enum):
    """How one record ended for one consumer name; every record ends as exactly one."""

    PROCESSED = "processed"
    DUPLICATE = "duplicate"
    STALE = "stale"
    SKIPPED = "skipped"
    UNHANDLED = "unhandled"
    REFUSED = "refused"
    DEAD_LETTERED = "dead_lettered"
    PARKED = "parked"


@dataclass
class ConsumerStats:
    """Outcome counts and timings of one consumer process, mirrored into its metrics."""

    metrics: ConsumerMetrics = field(default_factory=ConsumerMetrics)
    outcomes: Counter[Outcome] = field(default_factory=Counter)
    retries: int = 0
    lag_ms: list[float] = field(default_factory=list)
    handler_ms: list[float] = field(default_factory=list)

    def count(self, outcome: Outcome, consumer: str, records: int = 1) -> None:
        self.outcomes[outcome] += records
        self.metrics.records.labels(consumer, outcome.value).inc(records)

    def retry(self, consumer: str) -> None:
        self.retries += 1
        self.metrics.retries.labels(consumer).inc()
        self.metrics.failures.labels(consumer).inc()

    def handled(self, consumer: str, occurred_at: datetime | None, seconds: float) -> None:
        """An applied event: its transaction's time and commit-to-handle lag."""
        self.handled_together(consumer, [occurred_at], seconds)

    def handled_together(
        self, consumer: str, occurred: list[datetime | None], seconds: float
    ) -> None:
        """Events applied by one commit: each took `seconds`, the commit's time."""
        handler_seconds = self.metrics.handler_seconds.labels(consumer)
        lag_seconds = self.metrics.lag_seconds.labels(consumer)
        now = time.time()
        for occurred_at in occurred:
            handler_seconds.observe(seconds)
            if len(self.handler_ms) < _MAX_SAMPLES:
                self.handler_ms.append(seconds * 1000)
            if occurred_at is not None:
                lag_s = now - occurred_at.timestamp()
                lag_seconds.observe(max(lag_s, 0.0))
                if len(self.lag_ms) < _MAX_SAMPLES:
                    self.lag_ms.append(lag_s * 1000)

    def cycle_part(self, part: str, since: float) -> float:
        """A part of a poll cycle (poll, apply, durable, offsets) that began at `since`
        (`time.perf_counter()`) ended now; returns now."""
        now = time.perf_counter()
        self.metrics.cycle_seconds.labels(part).observe(now - since)
        return now

    def __getitem__(self, outcome: Outcome) -> int:
        return self.outcomes[outcome]

    @property
    def total(self) -> int:
        return sum(self.outcomes.values())

    def lag_percentile(self, q: float) -> float | None:
        if not self.lag_ms:
            return None
        ordered = sorted(self.lag_ms)
        return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]
