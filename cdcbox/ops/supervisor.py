"""The supervisor: `Healer.round` in a loop, beside Connect, until asked to stop.

Each action is one log line (WARNING: something was wrong and was repaired) and one
increment of `cdcbox_heal_actions_total{action}`. Whatever a round meets while the
pipeline is broken (an unreachable Connect, Kafka or database, a worker answering 404
while it starts, a broker that has lost its metadata) is one ERROR line, then the next
round: never a reason to exit. A configuration error (a refused login) is raised, and
the command exits.
"""

from __future__ import annotations

import logging
import threading

from prometheus_client import CollectorRegistry, Counter

from cdcbox.errors import CdcboxError, ConfigError
from cdcbox.ops.heal import Healer

log = logging.getLogger("cdcbox.supervisor")


class HealMetrics:
    """The supervisor's counters, in a registry of their own."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.actions = Counter(
            "cdcbox_heal_actions",
            "Repairs the supervisor carried out, by action.",
            ["action"],
            registry=self.registry,
        )
        self.rounds = Counter(
            "cdcbox_heal_rounds", "Rounds the supervisor ran.", registry=self.registry
        )


def supervise(
    healer: Healer, interval_s: float, stop: threading.Event, metrics: HealMetrics
) -> None:
    """Run rounds every `interval_s` until `stop` is set."""
    log.info("supervising: a round every %.1f s (%s)", interval_s, healer.policy)
    while not stop.is_set():
        try:
            for action, outcome in healer.round():
                metrics.actions.labels(action.kind).inc()
                log.warning("%s -> %s", action.line(), outcome)
        except ConfigError:
            raise
        except CdcboxError as e:
            log.error("%s; next round in %.0f s", str(e).splitlines()[0], interval_s)
        metrics.rounds.inc()
        stop.wait(interval_s)
