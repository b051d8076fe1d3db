"""The transaction step, one record in one local transaction: inbox claim → version
guard → the handler → the outcome mark, then COMMIT.

The claim writes the inbox row as PROCESSED inside the handler's transaction, so it only
survives if the handler's change commits with it. The transaction is pipelined (see
`Handler.pipelined`): BEGIN travels with the claim, the handler's writes with COMMIT.
When a pipelined attempt fails in the database, the record is redone at once without a
pipeline, so a handler meets a failed statement where it sent it; a handler whose
records fail only pipelined (COPY, server-side cursors, several statements in one
string) is not pipelined again. A record whose COMMIT failed in flight is redone as one
that failed pipelined (`Redo`). Asked to overlap (`in_flight`), a versioned record's
COMMIT is left in flight for the next record's wait to bring back. A handler's
`SkipEvent` or `RefuseTransition` rolls its writes back; `record_signal` then records
why in a transaction of its own.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import psycopg

from cdcbox.consumer.signals import HandlerSignal, RefuseTransition
from cdcbox.consumer.stats import ConsumerStats, Outcome
from cdcbox.consumer.steps.guard import GuardStep
from cdcbox.consumer.steps.in_flight import Overlap, refusing_commit
from cdcbox.consumer.steps.route import Routed
from cdcbox.db import is_outage, pipelined_transaction
from cdcbox.event import Event
from cdcbox.postgres.claim_guard import ClaimAndAdvance
from cdcbox.seam.stores import Claim, GuardResult, Stores
from cdcbox.session import Session

log = logging.getLogger("cdcbox.consumer")


@dataclass(frozen=True)
class Redo:
    """A record's first try after its COMMIT failed in flight (`cause`)."""

    cause: BaseException


# How a record's first try runs: on its own, overlapped (its COMMIT may be left in
# flight), or redone after failing in flight. Retries after it run on their own.
FirstTry = Literal["alone", "overlap"] | Redo


class RecordTransaction:
    """One record in one local transaction: claim, guard, handler, mark, COMMIT.

    Guarantee: the inbox row, the version advance and the handler's writes commit
    together or not at all."""

    def __init__(
        self,
        stores: Stores,
        guard: GuardStep,
        stats: ConsumerStats,
        dedupe: bool = True,
        in_flight: Overlap | None = None,
    ) -> None:
        self.stores = stores
        self.guard = guard
        self.stats = stats
        self.dedupe = dedupe  # False only for the fault suite (FaultSwitches)
        self.unpipelined: set[str] = set()  # consumers whose records failed only pipelined
        # Where an overlapped record's COMMIT waits for its answer; its owner counts it.
        self.in_flight = in_flight or Overlap(confirmed=lambda pending: None)

    def apply(self, conn: Session, routed: Routed, first: FirstTry = "alone") -> Outcome:
        """Claim, guard, handle and mark in one transaction; any exception rolls it back.
        Claim and guard are one statement: BEGIN with claim + guard, the handler's
        statements, COMMIT: two round trips pipelined (see
        `cdcbox.db.pipelined_transaction`), four otherwise; overlapped (`first` is
        "overlap"), one, and the COMMIT is left in flight (`self.in_flight.pending`: its
        outcome is counted when it answers). A `Redo` is a record whose COMMIT failed in
        flight: redone as any record that fails pipelined is."""
        started = time.perf_counter()
        pipelined = routed.handler.pipelined
        if pipelined is None and routed.consumer in self.unpipelined:
            pipelined = False
        if first == "overlap" and pipelined is not False and self._overlappable(conn, routed):
            assert isinstance(conn, psycopg.Connection)
            outcome = self._pipelined_or_redone(conn, routed, self._overlapped, pipelined is None)
            if self.in_flight.pending is not None:
                return outcome  # counted once its COMMIT answers
        else:
            self.in_flight.settle()  # nothing may follow a COMMIT in flight but its own
            if pipelined is False or not isinstance(conn, psycopg.Connection):  # MariaDB
                with conn.transaction():
                    outcome = self._claim_and_apply(conn, routed)
            elif isinstance(first, Redo) and pipelined is None:
                outcome = self._redone(conn, routed, first.cause)
            elif pipelined:
                outcome = self._in_pipelined_transaction(conn, routed)
            else:
                outcome = self._pipelined_or_redone(conn, routed, self._in_pipelined_transaction)
        if outcome is Outcome.PROCESSED:
            self.stats.handled(
                routed.consumer, routed.event.occurred_at, time.perf_counter() - started
            )
        return outcome

    def _overlappable(self, conn: Session, routed: Routed) -> bool:
        return (
            isinstance(conn, psycopg.Connection)
            and isinstance(self.stores.claim_and_advance, ClaimAndAdvance)
            and routed.event.aggregate_version is not None
            and self.dedupe
        )

    def _in_pipelined_transaction(self, conn: psycopg.Connection[Any], routed: Routed) -> Outcome:
        with pipelined_transaction(conn):
            return self._claim_and_apply(conn, routed)

    def _overlapped(self, conn: psycopg.Connection[Any], routed: Routed) -> Outcome:
        """BEGIN and the claim sent after the COMMIT in flight, one wait for both; the
        handler's statements and this COMMIT left in flight (`in_flight`)."""
        event, name = routed.event, routed.consumer
        started = time.perf_counter()
        store = self.stores.claim_and_advance
        assert isinstance(store, ClaimAndAdvance)
        rows = self.in_flight.begin(conn, lambda: store.send(conn, event, name))
        try:
            claim, advanced = store.read(rows)
            with refusing_commit(conn):
                outcome = self._judged(conn, routed, claim, advanced)
            self.in_flight.commit(conn, routed, outcome, started)
        except BaseException:
            self.in_flight.abort()
            raise
        return outcome

    def _pipelined_or_redone(
        self,
        conn: psycopg.Connection[Any],
        routed: Routed,
        attempt: Callable[[psycopg.Connection[Any], Routed], Outcome],
        redo: bool = True,
    ) -> Outcome:
        """Pipelined; after a failure in the database, once more without the pipeline
        (unless `redo` is off: a handler that asked for the pipeline)."""
        try:
            return attempt(conn, routed)
        except (psycopg.Error, AssertionError) as e:  # psycopg asserts on a named cursor
            if conn.closed or is_outage(e) or not redo:
                raise  # the database's absence: the retry step waits for it
            pipelined_error = e
        return self._redone(conn, routed, pipelined_error)

    def _redone(self, conn: Session, routed: Routed, pipelined_error: BaseException) -> Outcome:
        """A record that failed pipelined, once more without the pipeline."""
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
            return self._judged(conn, routed, claim, advanced)
        claim = self.stores.inbox.claim(conn, event, name)
        if claim is None and self.dedupe:
            self.release_if_drained(conn, routed, claim)
            return Outcome.DUPLICATE
        outcome = self.guard_and_handle(conn, routed)
        return self._marked(conn, routed, claim, outcome)

    def _judged(
        self, conn: Session, routed: Routed, claim: Claim | None, advanced: GuardResult
    ) -> Outcome:
        """After the claim + guard statement: the handler, when it claimed in order."""
        if claim is None:
            self.release_if_drained(conn, routed, claim)
            return Outcome.DUPLICATE
        assert routed.event.aggregate_version is not None
        outcome = self.guard.judge(advanced, routed.event.aggregate_version)
        if outcome is None:
            routed.handler.invoke(routed.event, conn)
            outcome = Outcome.PROCESSED
        return self._marked(conn, routed, claim, outcome)

    def _marked(
        self, conn: Session, routed: Routed, claim: Claim | None, outcome: Outcome
    ) -> Outcome:
        if outcome is Outcome.STALE:
            self.stores.inbox.mark_skipped(conn, routed.event, routed.consumer, "stale version")
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
