"""The consumer pipelines a plain `handle()`'s statements, per record and in batch mode
(issue 23): the handler's logic must not see the difference. Against real PostgreSQL,
records fed without Kafka."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from cdcbox.consumer import Outcome
from cdcbox.consumer.pipeline import RecordPipeline
from cdcbox.db import PipelineAwareCursor, connect
from tests.helpers import unique
from tests.integration.test_database import (
    Counter,
    RecordedLetters,
    outcome_of,
    parking_pipeline,
    pipeline_for,
    record,
)

pytestmark = pytest.mark.integration


@pytest.fixture
def conn(database: str) -> Iterator[psycopg.Connection[Any]]:
    """A connection as the consumer opens it (`cdcbox.db.connect`)."""
    with connect(database, autocommit=True) as c:
        c.execute("CREATE TABLE IF NOT EXISTS pipelined_tally (id text PRIMARY KEY, n int)")
        yield c


class Tally(Counter):
    """The pattern a user writes without thinking of pipelines: UPDATE, and INSERT when
    the UPDATE found no row. Pipelined, `rowcount` would read -1 until the result
    arrived: the INSERT would never run and the count would stay at nothing."""

    def __init__(self, name: str, key: str) -> None:
        super().__init__(name)
        self.key = key
        self.calls = 0

    def handle(self, event: Any, conn: psycopg.Connection[Any]) -> None:
        self.calls += 1
        cur = conn.execute("UPDATE pipelined_tally SET n = n + 1 WHERE id = %s", (self.key,))
        if cur.rowcount == 0:
            conn.execute("INSERT INTO pipelined_tally VALUES (%s, 1)", (self.key,))
        self.applied.append(str(event.aggregate_version))


def tally(conn: psycopg.Connection[Any], key: str) -> int | None:
    row = conn.execute("SELECT n FROM pipelined_tally WHERE id = %s", (key,)).fetchone()
    return None if row is None else int(row[0])


def batch(pipeline: RecordPipeline, conn: psycopg.Connection[Any], *versions: int) -> None:
    aggregate = unique("agg")
    pipeline.process_batch(lambda: conn, [record(aggregate, v) for v in versions])


def test_a_handler_reading_rowcount_keeps_its_meaning_when_pipelined(
    database: str, conn: psycopg.Connection[Any]
) -> None:
    key = unique("tally")
    handler = Tally(unique("consumer"), key)
    batch(pipeline_for(database, handler, batch_mode=True), conn, 1, 2, 3)
    assert tally(conn, key) == 3
    assert handler.calls == 3  # on the fast path: no redo


def test_without_the_pipeline_aware_cursor_rowcount_lies(
    database: str, conn: psycopg.Connection[Any]
) -> None:
    """The safeguard switched off: psycopg's own cursor reads -1, so no row is counted."""
    conn.cursor_factory = psycopg.Cursor
    key = unique("tally")
    batch(pipeline_for(database, Tally(unique("consumer"), key), batch_mode=True), conn, 1, 2)
    assert tally(conn, key) is None
    conn.cursor_factory = PipelineAwareCursor


class CatchesItsOwnError(Counter):
    """Inserts each event's aggregate once, ignoring a duplicate through a savepoint."""

    def handle(self, event: Any, conn: psycopg.Connection[Any]) -> None:
        try:
            with conn.transaction():
                conn.execute("INSERT INTO pipelined_tally VALUES (%s, 1)", (event.aggregate_id,))
        except psycopg.errors.UniqueViolation:
            conn.execute(
                "UPDATE pipelined_tally SET n = n + 1 WHERE id = %s", (event.aggregate_id,)
            )
        self.applied.append(str(event.aggregate_version))


def test_a_handler_catching_an_error_in_a_savepoint_sees_it_pipelined(
    database: str, conn: psycopg.Connection[Any]
) -> None:
    handler = CatchesItsOwnError(unique("consumer"))
    aggregate = unique("agg")
    pipeline = pipeline_for(database, handler, batch_mode=True)
    pipeline.process_batch(lambda: conn, [record(aggregate, v) for v in (1, 2, 3)])
    assert tally(conn, aggregate) == 3
    assert handler.applied == ["1", "2", "3"]
    assert pipeline.stats[Outcome.PROCESSED] == 3


class FailsInTheDatabase(Counter):
    """A statement that fails in PostgreSQL (not in Python) for one aggregate's first
    event: pipelined, the error surfaces at a later statement or when the batch's
    pipeline ends, not at the failing one."""

    def __init__(self, name: str, failing: str) -> None:
        super().__init__(name)
        self.failing = failing

    def handle(self, event: Any, conn: psycopg.Connection[Any]) -> None:
        divisor = 0 if (event.aggregate_id, event.aggregate_version) == (self.failing, 1) else 1
        conn.execute("SELECT 1 / %s", (divisor,))
        self.applied.append(f"{event.aggregate_id}:{event.aggregate_version}")


def test_a_statement_failing_late_defers_only_its_aggregate(
    database: str, conn: psycopg.Connection[Any]
) -> None:
    a, b = unique("a"), unique("b")
    handler = FailsInTheDatabase(unique("consumer"), b)
    letters = RecordedLetters()
    pipeline = parking_pipeline(database, handler, letters, batch_mode=True)
    pipeline.process_batch(lambda: conn, [record(a, 1), record(b, 1), record(b, 2), record(a, 2)])
    # The pipelined pass ran the handler until b:1's error came back (PostgreSQL sends an
    # error as soon as it meets it: at the pipeline's end, or while a:2 is still being
    # sent), was rolled back, and the redo with savepoints applied a in order; b:1 was
    # dead-lettered (per record) and b:2 followed it to the park.
    a_calls = [x for x in handler.applied if x.startswith(a)]
    assert a_calls in ([f"{a}:1", f"{a}:1", f"{a}:2"], [f"{a}:1", f"{a}:2"] * 2), a_calls
    assert letters.sent == [(b, "1"), (b, "2")]
    assert pipeline.stats[Outcome.PROCESSED] == 2
    assert pipeline.stats[Outcome.DEAD_LETTERED] == 1
    assert pipeline.batch.unpipelined == set()  # a failing record is not the pipeline's fault


class Copies(Counter):
    """Writes with COPY, which a pipeline cannot carry."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.calls = 0

    def handle(self, event: Any, conn: psycopg.Connection[Any]) -> None:
        self.calls += 1
        with conn.cursor().copy("COPY pipelined_tally (id, n) FROM STDIN") as copy:
            copy.write_row((str(event.event_id), 1))
        self.applied.append(str(event.aggregate_version))


def test_a_handler_a_pipeline_cannot_carry_is_applied_and_no_longer_pipelined(
    database: str, conn: psycopg.Connection[Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="cdcbox.consumer")
    handler = Copies(unique("consumer"))
    pipeline = pipeline_for(database, handler, batch_mode=True)
    batch(pipeline, conn, 1, 2)
    assert handler.applied == ["1", "2"]
    assert handler.calls == 3  # the pipelined pass failed at its first COPY, then 2 redone
    assert pipeline.batch.unpipelined == {handler.consumer_name}
    assert "without a pipeline from now on" in caplog.text
    batch(pipeline, conn, 1, 2)
    assert handler.calls == 5  # the fast path, unpipelined: no redo
    assert pipeline.stats[Outcome.PROCESSED] == 4


class NeverPipelined(Tally):
    pipelined = False


def test_a_handler_can_refuse_the_pipeline(database: str, conn: psycopg.Connection[Any]) -> None:
    """`pipelined = False`: psycopg's own cursor would still be right, as no pipeline runs."""
    conn.cursor_factory = psycopg.Cursor
    key = unique("tally")
    batch(pipeline_for(database, NeverPipelined(unique("consumer"), key), batch_mode=True), conn, 1)
    assert tally(conn, key) == 1
    conn.cursor_factory = PipelineAwareCursor


# --- per-record mode -------------------------------------------------------------------


def test_per_record_a_handler_reading_rowcount_keeps_its_meaning(
    database: str, conn: psycopg.Connection[Any]
) -> None:
    key = unique("tally")
    handler = Tally(unique("consumer"), key)
    pipeline = pipeline_for(database, handler)
    aggregate = unique("agg")
    for version in (1, 2, 3):
        assert outcome_of(pipeline, conn, record(aggregate, version)) == Outcome.PROCESSED
    assert tally(conn, key) == 3
    assert handler.calls == 3  # pipelined, each at the first attempt


def test_per_record_a_statement_failing_pipelined_is_redone_where_it_fails(
    database: str, conn: psycopg.Connection[Any]
) -> None:
    """The pipelined attempt fails at COMMIT; the record is redone at once without the
    pipeline (the handler runs twice in that attempt), fails again in the handler, and
    goes the usual way: retried, dead-lettered. A database error is the record's fault,
    not the pipeline's: the consumer stays pipelined."""
    b = unique("b")
    handler = FailsInTheDatabase(unique("consumer"), b)
    letters = RecordedLetters()
    pipeline = parking_pipeline(database, handler, letters)  # two attempts
    assert outcome_of(pipeline, conn, record(b, 1)) == Outcome.DEAD_LETTERED
    assert letters.sent == [(b, "1")]
    assert handler.applied == [f"{b}:1"] * 2  # ran to its end once per pipelined attempt
    assert pipeline.transaction.unpipelined == set()


def test_per_record_a_handler_a_pipeline_cannot_carry_is_applied_and_no_longer_pipelined(
    database: str, conn: psycopg.Connection[Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="cdcbox.consumer")
    handler = Copies(unique("consumer"))
    pipeline = pipeline_for(database, handler)
    aggregate = unique("agg")
    assert outcome_of(pipeline, conn, record(aggregate, 1)) == Outcome.PROCESSED
    assert handler.calls == 2  # the pipelined attempt, then the redo
    assert pipeline.transaction.unpipelined == {handler.consumer_name}
    assert "without one from now on" in caplog.text
    assert outcome_of(pipeline, conn, record(aggregate, 2)) == Outcome.PROCESSED
    assert handler.calls == 3


class Commits(Counter):
    """Commits by itself, which a handler must never do: its write would be committed
    apart from the inbox claim and the version guard."""

    def handle(self, event: Any, conn: psycopg.Connection[Any]) -> None:
        conn.execute("INSERT INTO pipelined_tally VALUES (%s, 1)", (str(event.event_id),))
        conn.commit()


def test_a_handler_that_commits_is_refused_and_nothing_it_wrote_is_kept(
    database: str, conn: psycopg.Connection[Any]
) -> None:
    """Pipelined (the default), psycopg still refuses `commit()` inside the record's
    transaction, as it does outside a pipeline."""
    handler = Commits(unique("consumer"))
    letters = RecordedLetters()
    pipeline = parking_pipeline(database, handler, letters)
    rec = record(unique("agg"), 1)
    assert outcome_of(pipeline, conn, rec) == Outcome.DEAD_LETTERED
    event_id = dict(rec.headers)["id"].decode()  # type: ignore[union-attr]
    assert tally(conn, event_id) is None


class MultiStatement(Counter):
    """Two statements in one parameterless string: PostgreSQL runs it outside a pipeline
    (simple query protocol) and refuses it in one (42601, a prepared statement)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.calls = 0

    def handle(self, event: Any, conn: psycopg.Connection[Any]) -> None:
        self.calls += 1
        conn.execute("SELECT 1; SELECT 2")
        self.applied.append(str(event.aggregate_version))


def test_per_record_a_database_error_only_a_pipeline_meets_stops_pipelining(
    database: str, conn: psycopg.Connection[Any]
) -> None:
    """Audit 33, case 8: the old code stopped pipelining only after an error the client
    raised; an error of the server that only a pipeline meets (42601 here) was redone
    record after record, the handler's effects outside the database twice each time
    (6 calls for 3 records on the old code, 4 now)."""
    handler = MultiStatement(unique("consumer"))
    pipeline = pipeline_for(database, handler)
    aggregate = unique("agg")
    for version in (1, 2, 3):
        assert outcome_of(pipeline, conn, record(aggregate, version)) == Outcome.PROCESSED
    assert handler.applied == ["1", "1", "2", "3"]
    assert handler.calls == 4
    assert pipeline.transaction.unpipelined == {handler.consumer_name}
