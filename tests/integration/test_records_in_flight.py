"""Per-record mode with several records' transactions in flight (issue 38): a record's
COMMIT is answered with the next record's claim, one wait per record, and nothing else
changes. Against real PostgreSQL, records fed without Kafka: the next record in flight
while the earlier one fails at its claim, in its handler, and at COMMIT."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql

from cdcbox.consumer import Outcome
from cdcbox.consumer.pipeline import RecordPipeline
from cdcbox.consumer.steps.in_flight import CommitInDoubt
from cdcbox.db import Reconnecting, connect
from cdcbox.wire import ConsumedRecord
from tests.helpers import unique
from tests.integration.test_database import (
    Counter,
    FailsOn,
    RecordedLetters,
    parking_pipeline,
    pipeline_for,
    record,
)
from tests.integration.test_pipelined_transaction import waits

pytestmark = pytest.mark.integration


@pytest.fixture
def conn(database: str) -> Iterator[psycopg.Connection[Any]]:
    """A connection as the consumer opens it (`cdcbox.db.connect`)."""
    with connect(database, autocommit=True) as c:
        yield c


class Writes(Counter):
    """Writes one row per event (aggregate, version), and records the order it ran in."""

    def __init__(self, name: str, table: str) -> None:
        super().__init__(name)
        self.table = table

    def handle(self, event: Any, conn: psycopg.Connection[Any]) -> None:
        self.applied.append(f"{event.aggregate_id}:{event.aggregate_version}")
        conn.execute(
            sql.SQL("INSERT INTO {} VALUES (%s, %s)").format(sql.Identifier(self.table)),
            (event.aggregate_id, event.aggregate_version),
        )


def effects_table(conn: psycopg.Connection[Any]) -> str:
    table = unique("effects")
    conn.execute(
        sql.SQL("CREATE TABLE {} (aggregate_id text, version int)").format(sql.Identifier(table))
    )
    return table


def committed(database: str, consumer: str) -> set[tuple[str, int]]:
    """The inbox rows another session sees: what has committed."""
    with psycopg.connect(database, autocommit=True) as other:
        rows = other.execute(
            "SELECT aggregate_id, aggregate_version FROM inbox_event WHERE consumer_name = %s",
            (consumer,),
        ).fetchall()
    return {(r[0], int(r[1])) for r in rows}


def key_of(rec: ConsumedRecord) -> tuple[str, int]:
    headers = dict(rec.headers)
    return (rec.key or b"").decode(), int(headers["aggregate_version"] or b"0")


def test_records_wait_once_each_and_end_only_once_committed(
    database: str, conn: psycopg.Connection[Any]
) -> None:
    """Ten records: eleven waits (one a record, one for the last COMMIT), where each
    record waited twice before. A record ends (its offset may be committed) only when
    another session already sees its commit."""
    handler = Writes(unique("consumer"), effects_table(conn))
    pipeline = pipeline_for(database, handler)
    records = [record(unique("agg"), 1) for _ in range(10)]
    ended: list[tuple[str, int]] = []

    def end(rec: ConsumedRecord) -> None:
        assert key_of(rec) in committed(database, handler.consumer_name)
        ended.append(key_of(rec))

    count = waits(conn, lambda: pipeline.process_records(lambda: conn, records, end))
    assert ended == [key_of(r) for r in records]
    assert pipeline.stats.outcomes[Outcome.PROCESSED] == 10
    assert count <= len(records) + 1  # answers read in passing are no wait


def run_with_b1_failing(
    database: str, conn: psycopg.Connection[Any], pipeline: RecordPipeline, a: str, b: str
) -> list[tuple[str, int]]:
    """a1, b1, a2, b2 in one run, b1 failing for good: returns the records that ended."""
    ended: list[tuple[str, int]] = []
    records = [record(a, 1), record(b, 1), record(a, 2), record(b, 2)]
    pipeline.process_records(lambda: conn, records, lambda r: ended.append(key_of(r)))
    return ended


def assert_b1_stopped_what_followed(
    pipeline: RecordPipeline, handler: Counter, letters: RecordedLetters, a: str, b: str
) -> None:
    """b1 retried and dead-lettered before a2 ran; b2 parked behind it; a applied."""
    calls = handler.applied
    assert calls[0] == f"{a}:1"
    assert calls[-1] == f"{a}:2"  # a2 ran once, after every try of b1
    assert all(c == f"{b}:1" for c in calls[1:-1]) and len(calls) >= 3
    assert letters.sent == [(b, "1"), (b, "2")]
    outcomes = pipeline.stats.outcomes
    assert outcomes[Outcome.PROCESSED] == 2
    assert outcomes[Outcome.DEAD_LETTERED] == 1
    assert outcomes[Outcome.PARKED] == 1


def test_a_record_failing_at_commit_is_redone_before_the_one_in_flight_after_it(
    database: str, conn: psycopg.Connection[Any], caplog: pytest.LogCaptureFixture
) -> None:
    """b1's write breaks a deferred rule: its COMMIT fails 0.2 s after it was sent, when
    a2's BEGIN and claim are already on their way. Nothing of a2 ran; b1 is redone on its
    own (retried, dead-lettered, its aggregate parked), then a2 applies."""
    caplog.set_level(logging.WARNING, logger="cdcbox.consumer")
    a, b = unique("a"), unique("b")
    table = effects_table(conn)
    conn.execute(
        sql.SQL(
            "CREATE FUNCTION {fn}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "IF NEW.aggregate_id = {b} AND NEW.version = 1 THEN PERFORM pg_sleep(0.2); "
            "RAISE EXCEPTION 'b1 breaks a deferred rule'; END IF; RETURN NULL; END $$; "
            "CREATE CONSTRAINT TRIGGER deferred_rule AFTER INSERT ON {t} "
            "DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION {fn}()"
        ).format(fn=sql.Identifier(table + "_rule"), b=sql.Literal(b), t=sql.Identifier(table))
    )
    handler = Writes(unique("consumer"), table)
    letters = RecordedLetters()
    pipeline = parking_pipeline(database, handler, letters)
    ended = run_with_b1_failing(database, conn, pipeline, a, b)
    assert ended == [(a, 1), (b, 1), (a, 2), (b, 2)]
    assert "a record's COMMIT failed" in caplog.text  # found in flight, not at its COMMIT
    assert_b1_stopped_what_followed(pipeline, handler, letters, a, b)
    rows = conn.execute(
        sql.SQL("SELECT aggregate_id, version FROM {} ORDER BY version").format(
            sql.Identifier(table)
        )
    ).fetchall()
    assert rows == [(a, 1), (a, 2)]
    assert committed(database, handler.consumer_name) >= {(a, 1), (a, 2)}


def test_a_record_failing_in_its_handler_stops_what_follows(
    database: str, conn: psycopg.Connection[Any]
) -> None:
    """a1's COMMIT is in flight when b1's handler raises: a1 commits, b1 is retried and
    dead-lettered, b2 parked behind it, and a2 applies after all of b1's tries."""
    a, b = unique("a"), unique("b")
    handler = FailsOn(unique("consumer"), {(b, 1)})
    letters = RecordedLetters()
    pipeline = parking_pipeline(database, handler, letters)
    ended = run_with_b1_failing(database, conn, pipeline, a, b)
    assert ended == [(a, 1), (b, 1), (a, 2), (b, 2)]
    assert handler.applied == [f"{a}:1", f"{a}:2"]  # FailsOn records only what it applied
    assert letters.sent == [(b, "1"), (b, "2")]
    assert committed(database, handler.consumer_name) >= {(a, 1), (a, 2)}


def test_a_record_failing_at_its_claim_stops_what_follows(
    database: str, conn: psycopg.Connection[Any]
) -> None:
    """The inbox refuses b1's claim (a trigger) while a1's COMMIT is in flight: a1
    commits, b1 is dead-lettered without its handler ever running, b2 parked."""
    a, b = unique("a"), unique("b")
    handler = Writes(unique("consumer"), effects_table(conn))
    trigger = unique("refuse_claim")
    conn.execute(
        sql.SQL(
            "CREATE FUNCTION {fn}() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "IF NEW.consumer_name = {c} AND NEW.aggregate_id = {b} "
            "AND NEW.aggregate_version = 1 AND NEW.status = 'PROCESSED' THEN "
            "RAISE EXCEPTION 'the inbox refuses b1'; END IF; RETURN NEW; END $$; "
            "CREATE TRIGGER {tr} BEFORE INSERT ON inbox_event FOR EACH ROW "
            "EXECUTE FUNCTION {fn}()"
        ).format(
            fn=sql.Identifier(trigger),
            tr=sql.Identifier(trigger),
            c=sql.Literal(handler.consumer_name),
            b=sql.Literal(b),
        )
    )
    try:
        letters = RecordedLetters()
        pipeline = parking_pipeline(database, handler, letters)
        ended = run_with_b1_failing(database, conn, pipeline, a, b)
    finally:
        conn.execute(sql.SQL("DROP TRIGGER {} ON inbox_event").format(sql.Identifier(trigger)))
    assert ended == [(a, 1), (b, 1), (a, 2), (b, 2)]
    assert handler.applied == [f"{a}:1", f"{a}:2"]
    assert letters.sent == [(b, "1"), (b, "2")]
    assert committed(database, handler.consumer_name) >= {(a, 1), (a, 2)}


def test_a_session_lost_with_a_commit_in_flight_ends_nothing_unproven(
    database: str, conn: psycopg.Connection[Any]
) -> None:
    """The session is terminated after a1's COMMIT was sent and before a2 begins: a1
    ends only if its COMMIT's answer was read; otherwise the run stops as an outage
    (`CommitInDoubt`) and the records come back, a committed a1 then a duplicate."""
    handler = Writes(unique("consumer"), effects_table(conn))
    pipeline = pipeline_for(database, handler)
    a = unique("a")
    records = [record(a, 1), record(a, 2)]
    source = Reconnecting(database)
    calls = 0

    def connection() -> Any:
        nonlocal calls
        calls += 1
        session = source()
        if calls == 2:  # a2's transaction is about to begin
            pid = session.info.backend_pid
            conn.execute("SELECT pg_terminate_backend(%s, 10000)", (pid,))
        return session

    ended: list[tuple[str, int]] = []
    try:
        pipeline.process_records(connection, records, lambda r: ended.append(key_of(r)))
    except psycopg.OperationalError:
        pytest.fail("a lost session must surface as cdcbox's outage, not psycopg's")
    except CommitInDoubt:
        assert ended == []
    assert set(ended) <= committed(database, handler.consumer_name)
    rest = records[len(ended) :]
    pipeline.process_records(source, rest, lambda r: ended.append(key_of(r)))
    assert ended == [(a, 1), (a, 2)]
    assert committed(database, handler.consumer_name) == {(a, 1), (a, 2)}
    rows = conn.execute(
        sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(handler.table))
    ).fetchone()
    assert rows == (2,)
    source.close()
