"""Step 7, batch mode: a whole poll batch in one transaction — one multi-row inbox claim,
guard + handler per record, one status UPDATE, one COMMIT.

The fast path takes no savepoints (no extra round trips per record); if a record fails,
the batch is redone with a savepoint per record, and the failing record is deferred with
its aggregate's later records in the batch to the per-record path (retries, dead
letter) after the commit, so per-aggregate order holds. If the transaction itself fails
(e.g. the database went away), nothing committed and every record is deferred.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import psycopg

from cdcbox.consumer.stats import Outcome
from cdcbox.consumer.steps.route import Routed
from cdcbox.consumer.steps.transaction import RecordTransaction
from cdcbox.consumer.stores import Stores
from cdcbox.parking import ParkedKey

log = logging.getLogger("cdcbox.consumer")


class _NeedsSavepoints(Exception):
    """A record failed on the batch's fast path; the batch is redone with savepoints."""


@dataclass
class BatchResult:
    applied: list[tuple[Routed, Outcome]] = field(default_factory=list)
    deferred: list[Routed] = field(default_factory=list)  # in order, for the per-record path


class BatchTransaction:
    def __init__(self, stores: Stores, transaction: RecordTransaction) -> None:
        self.stores = stores
        self.transaction = transaction

    def apply(self, conn: psycopg.Connection[Any], batch: list[Routed]) -> BatchResult:
        """Apply distinct (event, consumer) records; see the module docstring."""
        try:
            try:
                return self._run(conn, batch, savepoints=False)
            except _NeedsSavepoints:
                return self._run(conn, batch, savepoints=True)
        except psycopg.Error as e:
            log.warning(
                "batch of %d records failed as a whole (%s); processing them one by one",
                len(batch),
                e,
            )
            return BatchResult(deferred=list(batch))

    def _run(
        self, conn: psycopg.Connection[Any], batch: list[Routed], savepoints: bool
    ) -> BatchResult:
        result = BatchResult()
        blocked: set[ParkedKey] = set()
        with conn.transaction():
            claimed = self.stores.inbox.claim_many(conn, [(r.event, r.consumer) for r in batch])
            for r in batch:
                if (r.event.event_id, r.consumer) not in claimed:
                    result.applied.append((r, Outcome.DUPLICATE))
                elif r.parked_key in blocked:
                    result.deferred.append(r)  # keep order behind its failed predecessor
                elif not savepoints:
                    try:
                        result.applied.append((r, self.transaction.guard_and_handle(conn, r)))
                    except Exception as e:
                        raise _NeedsSavepoints from e
                else:
                    try:
                        with conn.transaction():  # SAVEPOINT
                            result.applied.append((r, self.transaction.guard_and_handle(conn, r)))
                    except Exception:
                        blocked.add(r.parked_key)
                        result.deferred.append(r)
            self.stores.inbox.finish_many(
                conn,
                [
                    (
                        r.event,
                        r.consumer,
                        "PROCESSED" if o is Outcome.PROCESSED else "SKIPPED",
                        "stale version" if o is Outcome.STALE else None,
                    )
                    for r, o in result.applied
                    if o in (Outcome.PROCESSED, Outcome.STALE)
                ],
            )
            for r, _ in result.applied:
                claim = claimed.get((r.event.event_id, r.consumer))
                self.transaction.release_if_drained(conn, r, claim)
        return result
