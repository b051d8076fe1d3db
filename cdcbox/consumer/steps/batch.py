"""Batch mode: the transaction step for a whole poll batch at once.

The fast path costs a fixed number of statements whatever the batch's size: one
multi-row inbox claim, one locking read of the batch's aggregate versions (judged in
memory, record by record), one `handle_batch` call per handler, one version upsert, one
status UPDATE, COMMIT. If anything on it fails — a handler, a signal, a version gap
under `hold`, a version moved by another transaction — the batch is redone with a
savepoint and the one-by-one guard per record, and a failing record is deferred with
its aggregate's later records in the batch to the per-record path (retries, dead
letter) after the commit, so per-aggregate order holds. If the transaction itself fails
(e.g. the database went away), nothing committed and every record is deferred.

A batch that fails pipelined and then applies every record on the savepoint path failed
because of the pipeline (COPY, server-side cursors and strings of several statements
cannot run in one): that
consumer's handlers are not pipelined again by this consumer, and a warning says so.
"""

from __future__ import annotations

import logging
import uuid
from contextlib import nullcontext
from dataclasses import dataclass, field

import psycopg

from cdcbox import db
from cdcbox.consumer.handler import NoHandler
from cdcbox.consumer.stats import Outcome
from cdcbox.consumer.steps.guard import GuardStep
from cdcbox.consumer.steps.route import Routed
from cdcbox.consumer.steps.transaction import RecordTransaction
from cdcbox.errors import DatabaseError
from cdcbox.seam.stores import BatchVersions, Claim, ParkedKey, Stores
from cdcbox.session import Session

log = logging.getLogger("cdcbox.consumer")


class _NeedsSavepoints(Exception):
    """A record failed on the batch's fast path; the batch is redone with savepoints."""

    def __init__(self, pipelined: frozenset[str]) -> None:
        super().__init__()
        self.pipelined = pipelined  # the consumers whose handlers ran pipelined


@dataclass
class BatchResult:
    """What a batch transaction applied (with each record's outcome) and what it left, in
    order, to the per-record path."""

    applied: list[tuple[Routed, Outcome]] = field(default_factory=list)
    deferred: list[Routed] = field(default_factory=list)  # in order, for the per-record path


class BatchTransaction:
    """Applies a poll batch in one transaction (see the module docstring). Guarantee: a
    record is either applied in the batch's commit or deferred with its aggregate's later
    records, so per-aggregate order holds."""

    def __init__(self, stores: Stores, transaction: RecordTransaction) -> None:
        self.stores = stores
        self.transaction = transaction
        self.guard: GuardStep = transaction.guard
        self.unpipelined: set[str] = set()  # consumers whose batches failed only pipelined

    def apply(self, conn: Session, batch: list[Routed]) -> BatchResult:
        """Apply distinct (event, consumer) records; see the module docstring."""
        try:
            try:
                return self._fast(conn, batch)
            except _NeedsSavepoints as failed:
                result = self._with_savepoints(conn, batch)
                if failed.pipelined and not result.deferred:
                    self._stop_pipelining(failed.pipelined, failed.__cause__)
                return result
        except (psycopg.Error, DatabaseError) as e:
            log.warning(
                "batch of %d records failed as a whole (%s); processing them one by one",
                len(batch),
                e,
            )
            return BatchResult(deferred=list(batch))

    def _stop_pipelining(self, consumers: frozenset[str], error: BaseException | None) -> None:
        self.unpipelined |= consumers
        log.warning(
            "batch mode: a batch of %s failed pipelined (%s) and applied record by record; "
            "their handlers run without a pipeline from now on (set `pipelined = False` "
            "on a handler that uses COPY, a server-side cursor or several statements in one "
            "string to say so)",
            ", ".join(sorted(consumers)),
            error,
        )

    def _pipelined(self, calls: list[list[Routed]]) -> frozenset[str]:
        """The consumers whose handlers may run pipelined in this batch."""
        return frozenset(
            routed[0].consumer
            for routed in calls
            if routed[0].handler.pipelined is not False
            and routed[0].consumer not in self.unpipelined
        )

    def _fast(self, conn: Session, batch: list[Routed]) -> BatchResult:
        result = BatchResult()
        pipelined: frozenset[str] = frozenset()
        try:
            with conn.transaction():
                claimed = self._claim(conn, batch, result, processed=True)
                fresh = [r for r in batch if (r.event.event_id, r.consumer) in claimed]
                versions = BatchVersions(
                    self.stores.versions.lock_many(
                        conn,
                        {r.parked_key for r in fresh if r.event.aggregate_version is not None},
                    )
                )
                to_handle: list[Routed] = []
                for r in fresh:
                    version = r.event.aggregate_version
                    if version is not None:
                        verdict = self.guard.judge(versions.advance(r.parked_key, version), version)
                        if verdict is not None:
                            result.applied.append((r, verdict))
                            continue
                    if isinstance(r.handler, NoHandler):  # its version consumed, nothing run
                        result.applied.append((r, Outcome.SKIPPED))
                        continue
                    to_handle.append(r)
                calls = handler_calls(to_handle)
                pipelined = self._pipelined(calls)
                for routed in calls:
                    # Leaving the pipeline waits for its results: a failed statement raises.
                    piped = routed[0].consumer in pipelined
                    with (
                        db.pipeline(conn)
                        if piped and isinstance(conn, psycopg.Connection)
                        else nullcontext()
                    ):
                        routed[0].handler.invoke_batch([r.event for r in routed], conn)
                    result.applied.extend((r, Outcome.PROCESSED) for r in routed)
                if not self.stores.versions.advance_many(conn, versions.advanced, versions.current):
                    raise RuntimeError("another transaction moved a version of this batch")
                self._finish(conn, result, claimed, marked=Outcome.PROCESSED)
        except Exception as e:
            raise _NeedsSavepoints(pipelined) from e
        return result

    def _with_savepoints(self, conn: Session, batch: list[Routed]) -> BatchResult:
        result = BatchResult()
        blocked: set[ParkedKey] = set()
        with conn.transaction():
            claimed = self._claim(conn, batch, result, processed=False)
            for r in batch:
                if (r.event.event_id, r.consumer) not in claimed:
                    continue
                if r.parked_key in blocked:
                    result.deferred.append(r)  # keep order behind its failed predecessor
                    continue
                try:
                    with conn.transaction():  # SAVEPOINT
                        result.applied.append((r, self.transaction.guard_and_handle(conn, r)))
                except Exception:
                    blocked.add(r.parked_key)
                    result.deferred.append(r)
            self._finish(conn, result, claimed, marked=None)
        return result

    def _claim(
        self,
        conn: Session,
        batch: list[Routed],
        result: BatchResult,
        processed: bool,
    ) -> dict[tuple[uuid.UUID, str], Claim]:
        """Claim the batch; the records claimed before end as duplicates."""
        claimed = self.stores.inbox.claim_many(
            conn, [(r.event, r.consumer) for r in batch], processed
        )
        result.applied.extend(
            (r, Outcome.DUPLICATE) for r in batch if (r.event.event_id, r.consumer) not in claimed
        )
        return claimed

    def _finish(
        self,
        conn: Session,
        result: BatchResult,
        claimed: dict[tuple[uuid.UUID, str], Claim],
        marked: Outcome | None,
    ) -> None:
        """Mark the claimed rows' outcomes (but those the claim already `marked`) and
        release the parks they drained."""
        self.stores.inbox.finish_many(
            conn,
            [
                (
                    r.event,
                    r.consumer,
                    "PROCESSED" if o is Outcome.PROCESSED else "SKIPPED",
                    _reason(r, o),
                )
                for r, o in result.applied
                if o in (Outcome.PROCESSED, Outcome.STALE, Outcome.SKIPPED) and o is not marked
            ],
        )
        for r, _ in result.applied:
            claim = claimed.get((r.event.event_id, r.consumer))
            self.transaction.release_if_drained(conn, r, claim)


def handler_calls(records: list[Routed]) -> list[list[Routed]]:
    """The batch's `invoke_batch` calls, in order: each handler's records in record order,
    split where an aggregate passes from one handler to another. Within one run of calls
    no aggregate has records for two handlers, so one aggregate's events reach their
    handlers in record order, versioned or not, as they do record by record."""
    calls: list[list[Routed]] = []
    open_calls: dict[int, list[Routed]] = {}  # by handler (identity), in this run
    handled_by: dict[tuple[str, str], int] = {}  # aggregate -> its handler in this run
    for r in records:
        handler, aggregate = id(r.handler), (r.event.aggregate_type, r.event.aggregate_id)
        if handled_by.get(aggregate, handler) != handler:
            open_calls, handled_by = {}, {}  # a new run, after every call of this one
        if handler not in open_calls:
            open_calls[handler] = []
            calls.append(open_calls[handler])
        open_calls[handler].append(r)
        handled_by[aggregate] = handler
    return calls


def _reason(routed: Routed, outcome: Outcome) -> str | None:
    if outcome is Outcome.STALE:
        return "stale version"
    if isinstance(routed.handler, NoHandler):
        return routed.handler.reason
    return None
