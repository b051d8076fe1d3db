"""Batch mode: a poll batch's records in one transaction (`steps.batch`), routed and
gated as one record is (`cdcbox.consumer.routing_ends`); what the batch could not apply
goes the per-record way, through the callbacks the pipeline hands it.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from cdcbox.consumer.routing_ends import RoutingEnds
from cdcbox.consumer.stats import ConsumerStats, Outcome
from cdcbox.consumer.steps.batch import BatchTransaction
from cdcbox.consumer.steps.route import Decoded, Routed, Router, Unroutable
from cdcbox.consumer.steps.transaction import RecordTransaction
from cdcbox.db import ConnectionSource
from cdcbox.event import Event
from cdcbox.telemetry import tracing
from cdcbox.wire import ConsumedRecord


class BatchMode:
    """Guarantee: the same as the per-record path's (each record one counted outcome,
    each effect at most once per consumer name, in version order), with one transaction
    for the records the batch could apply."""

    def __init__(
        self,
        router: Router,
        ends: RoutingEnds,
        batch: BatchTransaction,
        records: RecordTransaction,
        stats: ConsumerStats,
        per_record: Callable[[ConnectionSource, Decoded | Unroutable], None],
        settle: Callable[[ConnectionSource], None],
        apply_one: Callable[[ConnectionSource, Routed], None],
    ) -> None:
        self.router, self.ends, self.batch = router, ends, batch
        self.records, self.stats = records, stats
        self._per_record, self._settle, self._apply_one = per_record, settle, apply_one

    def process(self, connection: ConnectionSource, records: Sequence[ConsumedRecord]) -> None:
        """A poll batch in one transaction; what it could not apply goes record by record.
        A batch holding replayed copies goes record by record: whether a copy may pass its
        aggregate's park depends on the records before it having been applied. A record
        no handler of a consumer takes advances that consumer's version only after the
        batch's earlier records of its aggregate are applied, so it never makes them stale.
        """
        decoded = [self.router.decode(record) for record in records]
        if any(isinstance(d, Decoded) and d.replay is not None for d in decoded):
            for one in decoded:
                self._per_record(connection, one)
            return
        pending: list[Routed] = []
        self._settle(connection)
        for one in decoded:
            routing = one if isinstance(one, Unroutable) else self.router.route(one)
            passing, unhandled = self.ends.route(connection, one, routing)
            if unhandled is not None:
                event, consumers = unhandled
                if any(r.parked_key in _keys(event, consumers) for r in pending):
                    self._apply_batch(connection, pending)
                    pending = []
                self.records.consume_unhandled(connection(), event, consumers)
            pending += passing
        if pending:
            self._apply_batch(connection, pending)

    def _apply_batch(self, connection: ConnectionSource, routed: list[Routed]) -> None:
        started = time.perf_counter()
        distinct = self._distinct(routed)
        with tracing.batch_span(
            topics=[r.record.topic for r in distinct],
            group=self.ends.group_id,
            traceparents=[r.event.trace_id for r in distinct],
        ):
            result = self.batch.apply(connection(), distinct)
        # Each record's time is its batch's: none of them is committed before all are.
        seconds = time.perf_counter() - started
        counts = Counter((outcome, r.consumer) for r, outcome in result.applied)
        for (outcome, consumer), ended in counts.items():
            self.stats.count(outcome, consumer, ended)
        processed: dict[str, list[datetime | None]] = {}
        for r, outcome in result.applied:
            if outcome is Outcome.PROCESSED:
                processed.setdefault(r.consumer, []).append(r.event.occurred_at)
        for consumer, occurred in processed.items():
            self.stats.handled_together(consumer, occurred, seconds)
        for r in result.deferred:
            if self.ends.park_gate.holds(connection, r):
                self.stats.count(Outcome.PARKED, r.consumer)
            else:
                self._apply_one(connection, r)

    def _distinct(self, routed: list[Routed]) -> list[Routed]:
        """The same event twice in one batch: the second is a counted duplicate."""
        seen: set[tuple[Any, str]] = set()
        unique: list[Routed] = []
        for r in routed:
            key = (r.event.event_id, r.consumer)
            if key in seen:
                self.stats.count(Outcome.DUPLICATE, r.consumer)
            else:
                seen.add(key)
                unique.append(r)
        return unique


def _keys(event: Event, consumers: list[str]) -> set[tuple[str, str, str]]:
    return {(c, event.aggregate_type, event.aggregate_id) for c in consumers}
