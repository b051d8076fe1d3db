"""Records' transactions in flight (per-record mode on PostgreSQL): a record's COMMIT
is sent and not waited for, and the next record's BEGIN and claim follow it on the same
connection; the one wait for that claim's answer brings the COMMIT's back with it. One
wait for the server per record instead of two.

What still holds, and why:
- *Order.* The server runs one connection's statements in the order they were sent, and
  a record's handler runs only once its claim has answered, so it sees every earlier
  record's effects.
- *Nothing after a failed record runs.* After an error the server skips every
  statement up to the next Sync, and the only Sync is sent after the next record's
  claim: none of that record executes. Whether the earlier one committed is read from
  its COMMIT's own answer (`COMMIT`, or nothing), never guessed; when it did not, it is
  redone on its own before the next record starts again from its park gate
  (`EarlierCommitFailed`, handled by `RecordPipeline`).
- *Offsets.* A record ends, and its offset may be committed, only once its COMMIT has
  answered (`Overlap.confirmed`).
- *A connection lost with a COMMIT unanswered* leaves that commit in doubt:
  `CommitInDoubt` is an outage, and the runner comes back to the record (the inbox makes
  the second delivery a duplicate if the first had committed).

Whatever else uses the connection while a COMMIT is in flight settles it first
(`Overlap.settle`): a statement sent after it would run in no transaction of its own.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass
from typing import Any

import psycopg

from cdcbox.consumer.stats import Outcome
from cdcbox.consumer.steps.route import Routed
from cdcbox.db import end_failed_pipeline, is_outage, raise_statement_error, statement_error
from cdcbox.errors import CdcboxError, DatabaseUnavailable
from cdcbox.session import Rows


@dataclass(frozen=True)
class InFlight:
    """A record's transaction whose COMMIT was sent and has not answered yet."""

    routed: Routed
    outcome: Outcome  # what the record ends as once its COMMIT answers
    started: float  # `time.perf_counter()` when its transaction began
    commit: psycopg.Cursor[Any]  # its COMMIT's answer lands here


class EarlierCommitFailed(CdcboxError):
    """The transaction in flight before this one did not commit; nothing after it ran.
    It must be redone on its own before anything later is tried again."""

    def __init__(self, pending: InFlight, cause: BaseException) -> None:
        super().__init__(f"{pending.routed.consumer}: a record's COMMIT failed: {cause}")
        self.pending = pending
        self.cause = cause


class CommitInDoubt(DatabaseUnavailable):
    """The connection was lost while a COMMIT was in flight: whether it committed is
    unknown, so the record has not ended (it comes back; the inbox dedupes it)."""


class Overlap:
    """The in-flight transaction of one connection, and the pipeline that carries it.

    Guarantee: a transaction sent here is reported to `confirmed` only after its COMMIT
    answered `COMMIT`; one that did not is raised as `EarlierCommitFailed` before
    anything sent after it is let through."""

    def __init__(self, confirmed: Callable[[InFlight], None]) -> None:
        self.confirmed = confirmed
        self.pending: InFlight | None = None
        self._conn: psycopg.Connection[Any] | None = None
        self._pipeline: psycopg.Pipeline | None = None
        self._stack = ExitStack()

    def begin(self, conn: psycopg.Connection[Any], send_claim: Callable[[], Rows]) -> Rows:
        """Send BEGIN and the claim (`send_claim`) after whatever is in flight, and wait
        once: for the claim's answer, and with it the COMMIT in flight's."""
        if conn is not self._conn:
            self.settle()  # a COMMIT in flight on another connection
            self._pipeline = self._stack.enter_context(conn.pipeline())
            self._conn = conn
        assert self._pipeline is not None
        try:
            conn.execute(b"BEGIN")
            claim = send_claim()
            self._pipeline.sync()
        except psycopg.Error as e:
            self._settled_by_failure(statement_error(e))
            raise_statement_error(e)  # the earlier COMMIT answered: this record's own
        self._confirm()
        return claim

    def commit(
        self, conn: psycopg.Connection[Any], routed: Routed, outcome: Outcome, started: float
    ) -> None:
        """Send the record's COMMIT and leave it in flight."""
        self.pending = InFlight(routed, outcome, started, conn.execute(b"COMMIT"))

    def abort(self) -> None:
        """The record in its transaction failed (nothing earlier is in flight any more):
        roll it back and leave the pipeline."""
        self.pending = None
        self._close()

    def settle(self) -> None:
        """Wait for the COMMIT in flight, if any, and leave the pipeline: `confirmed`, or
        `EarlierCommitFailed`, or `CommitInDoubt`."""
        if self._pipeline is None:
            return
        try:
            self._stack.close()  # leaving the pipeline: one wait, for every answer
        except psycopg.Error as e:
            self._settled_by_failure(statement_error(e))
            raise_statement_error(e)  # nothing was in flight: the error as it is
        self._close()
        self._confirm()

    def abandon(self) -> None:
        """Processing stopped on an error: forget what is in flight without ending it
        (its record comes back) and leave the pipeline."""
        self.pending = None
        self._close()

    def _confirm(self) -> None:
        """After a wait that brought the in-flight COMMIT's answer back."""
        pending, self.pending = self.pending, None
        if pending is None:
            return
        if not _committed(pending):  # answered ROLLBACK: its transaction had failed
            self._close()  # and rolls back whatever was sent after it
            raise EarlierCommitFailed(pending, RuntimeError("COMMIT answered ROLLBACK"))
        self.confirmed(pending)

    def _settled_by_failure(self, error: BaseException) -> None:
        """After `error`, leave the pipeline (rolled back), then end the COMMIT in flight
        by its answer, or raise for it."""
        conn = self._conn
        self._close()
        pending, self.pending = self.pending, None
        if pending is None:
            return
        if _committed(pending):
            self.confirmed(pending)
            return
        if is_outage(error) or conn is None or conn.closed:
            raise CommitInDoubt(
                f"the database session ended with a COMMIT unanswered: {error}"
            ) from error
        raise EarlierCommitFailed(pending, error) from error

    def _close(self) -> None:
        """Leave the pipeline; what failed in it is rolled back (or the connection closed)."""
        conn, self._conn, self._pipeline = self._conn, None, None
        with suppress(psycopg.Error):  # raised already, or about to be, for its record
            self._stack.close()
        if conn is not None:
            end_failed_pipeline(conn)


def _committed(pending: InFlight) -> bool:
    result = pending.commit.pgresult
    return result is not None and result.command_status == b"COMMIT"


@contextmanager
def refusing_commit(conn: psycopg.Connection[Any]) -> Iterator[None]:
    """psycopg refuses `commit()` and `rollback()` inside the record's transaction, as it
    does in a `conn.transaction()` block: the BEGIN here is a plain statement, so
    psycopg's own count of open blocks is raised for the handler's call (psycopg 3.3)."""
    conn._num_transactions += 1
    try:
        yield
    finally:
        conn._num_transactions -= 1
