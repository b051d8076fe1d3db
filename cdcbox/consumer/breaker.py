"""A circuit breaker that tells an outage from a poison message.

One aggregate failing is a poison message: retry, then dead-letter it. Many different
aggregates failing within a short window is an outage (database, downstream service):
dead-lettering them all would flood the DLQ with good events. While the breaker is open
the consumer keeps retrying the current record at the longest backoff instead; the first
success closes it.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class BreakerPolicy:
    failing_aggregates: int = 5  # distinct aggregates failing within the window
    window_s: float = 30.0
    enabled: bool = True


class CircuitBreaker:
    def __init__(self, policy: BreakerPolicy, clock: Callable[[], float] = time.monotonic) -> None:
        self.policy = policy
        self.clock = clock
        self._failures: deque[tuple[float, str]] = deque()
        self.open = False

    def record_failure(self, aggregate: str) -> bool:
        """Note a failure; returns True when this opened the breaker."""
        now = self.clock()
        self._failures.append((now, aggregate))
        while self._failures and self._failures[0][0] < now - self.policy.window_s:
            self._failures.popleft()
        distinct = len({a for _, a in self._failures})
        was_open = self.open
        self.open = self.policy.enabled and distinct >= self.policy.failing_aggregates
        return self.open and not was_open

    def record_success(self) -> bool:
        """Note a success; returns True when this closed the breaker."""
        was_open = self.open
        self.open = False
        self._failures.clear()
        return was_open
