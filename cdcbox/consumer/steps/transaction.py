"""The transaction step, one record in one local transaction: inbox claim → version
guard → the handler → the outcome mark, then COMMIT.

The claim writes the inbox row as PROCESSED inside the handler's transaction, so it only
survives if the handler's change commits with it. The transaction is pipelined (see
`Handler.pipelined`): BEGIN travels with the claim, the handler's writes with COMMIT.
When a pipelined attempt fails in the database, the record is redone at once without a
pipeline, so a handler meets a failed statement where it sent it; a handler whose
records fail only pipelined (COPY, server-side cursors, several statements in one
string) is not pipelined again. A
handler's `SkipEvent` or `RefuseTransition` rolls its writes back; `record_signal` then
records why in a transaction of its own.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import psycopg

from cdcbox.consumer.signals import HandlerSignal, RefuseTransition
from cdcbox.consumer.stats import ConsumerStats, Outcome
from cdcbox.consumer.steps.guard import GuardStep
from cdcbox.consumer.steps.route import Routed
from cdcbox.consumer.stores import Stores
from cdcbox.db import is_outage, pipelined_transaction
from cdcbox.event import Event
from cdcbox.session import Session
from cdcbox.stores.protocols import Claim

log = logging.getLogger("cdcbox.consumer")


class RecordTransaction:
    """One record in one local transaction: claim, guard, handler, mark, COMMIT.

    Guarantee: the inbox row, the version advance and the handler's writes commit
    together or not at all."""

    def __init__(
        self, stores: Stores, guard: GuardStep, stats: ConsumerStats, dedupe: bool = True
    ) -> None:
        self.stores = stores
        self.guard = guard
        self.stats = stats
        self.dedupe = dedupe  # False only for the fault suite (FaultSwitches)
        self.unpipelined: set[str] = set()  # consumers whose records failed only pipelined

    def apply(self, conn: Session, routed: Routed) -> Outcome:
        """Claim, guard, handle and mark in one transaction; any exception rolls it back.
        Claim and guard are one statement: BEGIN with claim + guard, the handler's
        statements, COMMIT: two round trips pipelined (see
        `cdcbox.db.pipelined_transaction`), four otherwise."""
        started = time.perf_counter()
        pipelined = routed.handler.pipelined
        if pipelined is None and routed.consumer in self.unpipelined:
            pipelined = False
        if pipelined is False or not isinstance(conn, psycopg.Connection):  # MariaDB: none
            with conn.transaction():
                outcome = self._claim_and_apply(conn, routed)
        elif pipelined:
            with pipelined_transaction(conn):
                outcome = self._claim_and_apply(conn, routed)
        else:
            outcome = self._pipelined_or_redone(conn, routed)
        if outcome is Outcome.PROCESSED:
            self.stats.handled(
                routed.consumer, routed.event.occurred_at, time.perf_counter() - started
            )
        return outcome

    def _pipelined_or_redone(self, conn: psycopg.Connection[Any], routed: Routed) -> Outcome:
        """Pipelined; after a failure in the database, once more without the pipeline."""
        try:
            with pipelined_transaction(conn):
                return self._claim_and_apply(conn, routed)
        except (psycopg.Error, AssertionError) as e:  # psycopg asserts on a named cursor
            if conn.closed or is_outage(e):
                raise  # the database's absence: the retry step waits for it
            pipelined_error = e
        with conn.transaction():
            outcome = self._claim_and_apply(conn, routed)
        # Applied without the pipeline after failing in it: whether the client refused a
        # statement (COPY, a named cursor) or the server did (a parameterless string of
        # several statements, 42601), the pipeline was the cause. Redoing every later
        # record would run the handler, and its effects outside the database, twice.
        self.unpipelined.add(routed.consumer)
        log.warning(
            "%s: a record failed pipelined (%s) and applied without a pipeline; its "
            "records run without one from now on (set `pipelined = False` on a handler "
            "that uses COPY, a server-side cursor or several statements in one string)",
            routed.consumer,
            pipelined_error,
        )
        return outcome

    def _claim_and_apply(self, conn: Session, routed: Routed) -> Outcome:
        event, name = routed.event, routed.consumer
        if event.aggregate_version is not None and self.dedupe:
            claim, advanced = self.stores.claim_and_advance.run(conn, event, name)
            if claim is None:
                self.release_if_drained(conn, routed, claim)
                return Outcome.DUPLICATE
            outcome = self.guard.judge(advanced, event.aggregate_version)
            if outcome is None:
                routed.handler.invoke(event, conn)
                outcome = Outcome.PROCESSED
        else:
            claim = self.stores.inbox.claim(conn, event, name)
            if claim is None and self.dedupe:
                self.release_if_drained(conn, routed, claim)
                return Outcome.DUPLICATE
            outcome = self.guard_and_handle(conn, routed)
        if outcome is Outcome.STALE:
            self.stores.inbox.mark_skipped(conn, event, name, "stale version")
        self.release_if_drained(conn, routed, claim)
        return outcome

    def guard_and_handle(self, conn: Session, routed: Routed) -> Outcome:
        """Guard, then the handler, in the caller's transaction (the claim is done)."""
        stale = self.guard.check(conn, routed.event, routed.consumer)
        if stale is not None:
            return stale
        routed.handler.invoke(routed.event, conn)
        return Outcome.PROCESSED

    def release_if_drained(self, conn: Session, routed: Routed, claim: Claim | None) -> None:
        """A held-back event that ended here (a replayed copy, or one whose FAILED row was
        claimed again, e.g. redelivered after a rebalance) may be its aggregate's last:
        then the same commit releases the park."""
        if routed.replayed_for_me or claim == "reclaimed":
            self.stores.parking.release_if_drained(conn, routed.parked_key)

    def consume_unhandled(self, conn: Session, event: Event, consumers: list[str]) -> None:
        """An event of a subscribed topic that no handler of these consumers takes still
        consumes its version for each of them."""
        if event.aggregate_version is None or not consumers:
            return
        with conn.transaction():
            for name in consumers:
                self.guard.consume(conn, event, name)

    def record_signal(self, conn: Session, routed: Routed, signal: HandlerSignal) -> Outcome:
        """The handler's writes were rolled back; record why, in a transaction of its own."""
        event, name = routed.event, routed.consumer
        with conn.transaction():
            claim = self.stores.inbox.claim(conn, event, name)
            if claim is None:
                return Outcome.DUPLICATE
            self.guard.consume(conn, event, name)
            if isinstance(signal, RefuseTransition):
                self.stores.reconciliation.record(conn, event, name, signal.reason)
                self.stores.inbox.mark_skipped(conn, event, name, f"refused: {signal.reason}")
                self.release_if_drained(conn, routed, claim)
                return Outcome.REFUSED
            self.stores.inbox.mark_skipped(conn, event, name, signal.reason)
            self.release_if_drained(conn, routed, claim)
        return Outcome.SKIPPED
