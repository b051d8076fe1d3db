"""How each record ended, counted: nothing vanishes, every record has exactly one outcome."""

from __future__ import annotations

import enum
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from cdcbox import wire

_MAX_SAMPLES = 200_000


class Outcome(enum.Enum):
    PROCESSED = "processed"
    DUPLICATE = "duplicate"
    STALE = "stale"
    SKIPPED = "skipped"
    UNHANDLED = "unhandled"
    REFUSED = "refused"
    DEAD_LETTERED = "dead_lettered"


@dataclass
class ConsumerStats:
    outcomes: Counter[Outcome] = field(default_factory=Counter)
    retries: int = 0
    lag_ms: list[float] = field(default_factory=list)

    def count(self, outcome: Outcome) -> None:
        self.outcomes[outcome] += 1

    def observe_lag(self, record: Any) -> None:
        """Commit-to-handled lag from the occurred_at header (same clock on one machine)."""
        if len(self.lag_ms) >= _MAX_SAMPLES:
            return
        for name, value in record.headers or []:
            if name == wire.HEADER_OCCURRED_AT and value:
                try:
                    occurred = datetime.fromisoformat(value.decode()).timestamp()
                except ValueError:
                    return
                self.lag_ms.append((time.time() - occurred) * 1000)
                return

    def lag_percentile(self, q: float) -> float | None:
        if not self.lag_ms:
            return None
        ordered = sorted(self.lag_ms)
        return ordered[min(len(ordered) - 1, int(q / 100 * len(ordered)))]

    def __getitem__(self, outcome: Outcome) -> int:
        return self.outcomes[outcome]

    @property
    def total(self) -> int:
        return sum(self.outcomes.values())
