"""Holding a bulk job to a rate, so that it leaves the database's CPU and WAL to the
writers that run beside it."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from cdcbox.errors import UsageError


@dataclass
class Pace:
    """At most `per_second` units on average since `start()`: `done(n)` after each piece
    of work (n: units done so far) waits until the work is no longer ahead of the rate.
    `per_second` None: no wait at all. Only waits, never skips or drops work."""

    per_second: float | None
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    _started: float | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        if self.per_second is not None and self.per_second <= 0:
            raise UsageError(f"a rate of {self.per_second:g} per second is not positive")

    def start(self) -> None:
        self._started = self.clock()

    def done(self, units: int) -> None:
        if self.per_second is None:
            return
        assert self._started is not None, "Pace.done before Pace.start"
        ahead = units / self.per_second - (self.clock() - self._started)
        if ahead > 0:
            self.sleep(ahead)
