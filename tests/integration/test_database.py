"""Migrations, the producer, the inbox and the pipeline's database steps against real
PostgreSQL, and nothing else: records are fed to the pipeline without Kafka."""

from __future__ import annotations

import logging
import threading
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner
from psycopg import sql

from cdcbox.avro import Catalogue
from cdcbox.cli.main import cli
from cdcbox.consumer import ConsumerConfig, ConsumerStats, Outcome, RetryPolicy
from cdcbox.consumer.breaker import BreakerPolicy, CircuitBreaker
from cdcbox.consumer.handler import Handler
from cdcbox.consumer.pipeline import RecordPipeline
from cdcbox.consumer.signals import RefuseTransition
from cdcbox.consumer.steps.route import Decoded, Routed
from cdcbox.db import Reconnecting, durability_barrier
from cdcbox.errors import ConfigError, SchemaError, UsageError
from cdcbox.event import decode
from cdcbox.kafka.dlq import DeadLetterError
from cdcbox.migrate import migrate
from cdcbox.names import DbNames
from cdcbox.ops import retention
from cdcbox.postgres.database import postgres_stores
from cdcbox.postgres.inbox import Inbox
from cdcbox.producer.outbox import NewEvent, Outbox
from cdcbox.resources import resource_dir
from cdcbox.testing.harness import Record
from tests.helpers import a_record, eventually, migrated_schema, unique

pytestmark = pytest.mark.integration


def test_migrations_are_idempotent_and_safe_when_run_concurrently(database: str) -> None:
    names = DbNames(schema=unique("mig"))
    with psycopg.connect(database, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(names.schema)))
    results: list[list[str]] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            with psycopg.connect(database) as conn:
                results.append(migrate(conn, names=names, mode="polling"))
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    applied = sorted(results, key=len)
    assert applied[0] == []  # the second runner waited, then found nothing to do
    assert applied[1] == [
        "0001_outbox",
        "0002_inbox",
        "0004_parking",
        "0005_consumer_groups",
        "0006_inbox_purge_index",
        "0007_breaker",
        "0008_outbox_publishable",
        "0009_outbox_quarantine",
        "0010_outbox_topic_keys",
        "0011_outbox_causation_id",
        "0012_inbox_unfinished_index",
        "0013_outbox_cheaper_checks",
        "0014_inbox_touched_statistics",
        "polling/0001_relay_indexes",
        "polling/0002_notify",
        "polling/0003_unsent_indexes",
    ]
    with psycopg.connect(database) as conn:
        assert migrate(conn, names=names, mode="polling") == []
        indexes = {
            r[0]
            for r in conn.execute(
                "SELECT indexname FROM pg_indexes WHERE schemaname = %s AND tablename = %s",
                (names.schema, names.outbox),
            )
        }
        assert indexes == {
            "outbox_event_pkey",
            "outbox_event_event_id_key",
            "outbox_event_unsent_idx",
            "outbox_event_blocker_idx",
        }


def test_cdc_mode_creates_no_relay_indexes_and_a_least_privilege_role(
    db: psycopg.Connection[Any],
) -> None:
    indexes = {
        r[0]
        for r in db.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'outbox_event' "
            "AND schemaname = 'public'"
        )
    }
    assert indexes == {"outbox_event_pkey", "outbox_event_event_id_key"}
    role = db.execute(
        "SELECT rolreplication, rolsuper, rolcanlogin FROM pg_roles "
        "WHERE rolname = 'cdcbox_debezium'"
    ).fetchone()
    assert role == (True, False, True)
    grants = {
        r[0]
        for r in db.execute(
            "SELECT DISTINCT table_name FROM information_schema.role_table_grants "
            "WHERE grantee = 'cdcbox_debezium'"
        )
    }
    assert grants == {"outbox_event"}
    tables = db.execute(
        "SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = 'cdcbox_outbox'"
    ).fetchall()
    assert tables == [("public", "outbox_event")]
    publishes = db.execute(
        "SELECT pubinsert, pubupdate, pubdelete, pubtruncate "
        "FROM pg_publication WHERE pubname = 'cdcbox_outbox'"
    ).fetchone()
    assert publishes == (True, False, False, False)


def test_append_outside_a_transaction_is_refused(database: str) -> None:
    with (
        psycopg.connect(database, autocommit=True) as conn,
        pytest.raises(UsageError, match="outside a transaction"),
    ):
        Outbox().append(conn, NewEvent("order", "a", "T", {}))


def test_bad_payload_is_refused_before_anything_is_written(db: psycopg.Connection[Any]) -> None:
    aggregate = unique("agg")
    with db.transaction():
        with pytest.raises(SchemaError, match="not JSON-serialisable"):
            Outbox().append_many(
                db,
                [
                    NewEvent("order", aggregate, "T", {"ok": 1}),
                    NewEvent("order", aggregate, "T", {"bad": {1, 2}}),
                ],
            )
        count = db.execute(
            "SELECT count(*) FROM outbox_event WHERE aggregate_id = %s", (aggregate,)
        ).fetchone()
    assert count == (0,)


def test_append_many_is_one_statement_and_keeps_order(db: psycopg.Connection[Any]) -> None:
    aggregate = unique("agg")
    events = [NewEvent("order", aggregate, "T", {"i": i}, aggregate_version=i) for i in range(100)]
    with db.transaction():
        ids = Outbox().append_many(db, events)
    rows = db.execute(
        "SELECT event_id, aggregate_version, occurred_at FROM outbox_event "
        "WHERE aggregate_id = %s ORDER BY id",
        (aggregate,),
    ).fetchall()
    assert [r[0] for r in rows] == ids
    assert [r[1] for r in rows] == list(range(100))
    assert all(r[2].endswith("Z") and "T" in r[2] for r in rows)


# --- the consumer pipeline's database steps, with real records' shape ---------------------


def record(
    aggregate: str,
    version: int | None,
    event_id: uuid.UUID | None = None,
    event_type: str = "Changed",
) -> Record:
    headers: list[tuple[str, bytes | None]] = [
        ("id", str(event_id or uuid.uuid4()).encode()),
        ("event_type", event_type.encode()),
        ("aggregate_type", b"order"),
        ("content-type", b"application/json"),
    ]
    if version is not None:
        headers.append(("aggregate_version", str(version).encode()))
    return a_record(key=aggregate.encode(), value=b'{"v": 1}', headers=headers, offset=0)


class Counter(Handler):
    event_types = frozenset({"Changed", "Refused"})
    aggregate_types = ("order",)

    def __init__(self, name: str) -> None:
        self.consumer_name = name
        self.applied: list[str] = []

    def handle(self, event: Any, conn: psycopg.Connection[Any]) -> None:
        if event.event_type == "Refused":
            conn.execute("SELECT 1")
            raise RefuseTransition("order is cancelled")
        self.applied.append(str(event.aggregate_version))


def pipeline_for(database: str, handler: Handler, **options: Any) -> RecordPipeline:
    """The pipeline without Kafka: these records never reach the dead-letter path."""
    config = ConsumerConfig(
        bootstrap_servers="unused", dsn=database, group_id=handler.consumer_name, **options
    )
    return RecordPipeline(
        {t: (handler,) for t in handler.event_types},
        postgres_stores(),
        dead_letters=None,  # type: ignore[arg-type]
        config=config,
        stats=ConsumerStats(),
        breaker=CircuitBreaker(BreakerPolicy()),
    )


def routed_once(pipeline: RecordPipeline, rec: Record) -> Routed:
    """The one handler's `Routed` of `rec`."""
    decoded = pipeline.router.decode(rec)
    assert isinstance(decoded, Decoded)
    (routed,) = pipeline.router.route(decoded)  # type: ignore[misc]
    assert isinstance(routed, Routed)
    return routed


def outcome_of(pipeline: RecordPipeline, conn: psycopg.Connection[Any], rec: Record) -> Outcome:
    before = dict(pipeline.stats.outcomes)
    pipeline.process(lambda: conn, rec)
    changed = [o for o, n in pipeline.stats.outcomes.items() if n != before.get(o, 0)]
    assert len(changed) == 1
    return changed[0]


def test_duplicates_and_stale_versions_are_skipped_and_counted(
    database: str, db: psycopg.Connection[Any]
) -> None:
    handler = Counter(unique("consumer"))
    pipeline = pipeline_for(database, handler)
    aggregate = unique("agg")
    first = record(aggregate, 1)
    outcomes = [
        outcome_of(pipeline, db, r)
        for r in (
            first,
            record(aggregate, 3),
            first,
            record(aggregate, 2),
            record(aggregate, 3),
            record(aggregate, None),
        )
    ]
    assert outcomes == [
        Outcome.PROCESSED,
        Outcome.PROCESSED,
        Outcome.DUPLICATE,
        Outcome.STALE,
        Outcome.STALE,
        Outcome.PROCESSED,
    ]
    assert handler.applied == ["1", "3", "None"]
    version = db.execute(
        "SELECT version FROM consumer_aggregate_version WHERE consumer_name = %s "
        "AND aggregate_id = %s",
        (handler.consumer_name, aggregate),
    ).fetchone()
    assert version == (3,)
    statuses = db.execute(
        "SELECT status, count(*) FROM inbox_event WHERE consumer_name = %s "
        "GROUP BY status ORDER BY status",
        (handler.consumer_name,),
    ).fetchall()
    assert statuses == [("PROCESSED", 3), ("SKIPPED", 2)]


def test_a_batch_judges_versions_like_records_one_by_one_in_one_handler_call(
    database: str, db: psycopg.Connection[Any]
) -> None:
    """Batch mode's fast path: one locking read of the versions, judged in memory in
    record order, one `handle_batch` call, one version upsert. The outcome is the
    per-record path's (the test above), with an aggregate already known to the table."""
    handler = Counter(unique("consumer"))
    batches: list[list[str]] = []
    handle_batch = handler.handle_batch

    def recording(events: Any, conn: psycopg.Connection[Any]) -> None:
        batches.append([str(e.aggregate_version) for e in events])
        handle_batch(events, conn)

    handler.handle_batch = recording  # type: ignore[method-assign]
    pipeline = pipeline_for(database, handler, batch_mode=True)
    known, new = unique("agg"), unique("agg")
    pipeline.process_batch(lambda: db, [record(known, 2)])
    first = record(new, 1)
    pipeline.process_batch(
        lambda: db,
        [
            first,
            record(known, 1),  # older than the 2 already applied
            record(new, 3),
            first,
            record(new, 2),
            record(known, 4),
            record(new, 3),
            record(new, None),
        ],
    )
    assert batches == [["2"], ["1", "3", "4", "None"]]
    assert handler.applied == ["2", "1", "3", "4", "None"]
    assert pipeline.stats.outcomes == {
        Outcome.PROCESSED: 5,
        Outcome.DUPLICATE: 1,
        Outcome.STALE: 3,
    }
    versions = db.execute(
        "SELECT aggregate_id, version FROM consumer_aggregate_version "
        "WHERE consumer_name = %s ORDER BY version",
        (handler.consumer_name,),
    ).fetchall()
    assert versions == [(new, 3), (known, 4)]
    statuses = db.execute(
        "SELECT status, count(*) FROM inbox_event WHERE consumer_name = %s "
        "GROUP BY status ORDER BY status",
        (handler.consumer_name,),
    ).fetchall()
    assert statuses == [("PROCESSED", 5), ("SKIPPED", 3)]


def test_refused_transition_is_recorded_for_reconciliation(
    database: str, db: psycopg.Connection[Any]
) -> None:
    handler = Counter(unique("consumer"))
    refused = record(unique("agg"), 1, event_type="Refused")
    assert outcome_of(pipeline_for(database, handler), db, refused) == Outcome.REFUSED
    row = db.execute(
        "SELECT reason FROM consumer_reconciliation WHERE consumer_name = %s",
        (handler.consumer_name,),
    ).fetchone()
    assert row == ("order is cancelled",)
    # Redelivered, it is a duplicate: the refusal is final, not retried forever.
    assert outcome_of(pipeline_for(database, handler), db, refused) == Outcome.DUPLICATE


def test_gap_is_held_until_the_missing_version_is_applied(
    database: str, db: psycopg.Connection[Any]
) -> None:
    handler = Counter(unique("consumer"))
    aggregate = unique("agg")
    held = pipeline_for(
        database,
        handler,
        gap_policy="hold",
        retry=RetryPolicy(max_attempts=200, initial_delay_s=0.01, max_delay_s=0.02),
    )
    assert outcome_of(held, db, record(aggregate, 1)) == Outcome.PROCESSED

    # Version 3 arrives before 2: it is retried, not applied, while 2 is missing ...
    done = threading.Event()

    def process_v3() -> None:
        with psycopg.connect(database, autocommit=True) as conn:
            held.process(lambda: conn, record(aggregate, 3))
        done.set()

    worker = threading.Thread(target=process_v3)
    worker.start()
    eventually(lambda: held.stats.retries >= 3, timeout=30, what="version 3 held")
    assert handler.applied == ["1"]
    # ... until version 2 is applied (here by a second instance of the same consumer).
    with psycopg.connect(database, autocommit=True) as other:
        assert outcome_of(pipeline_for(database, handler), other, record(aggregate, 2)) == (
            Outcome.PROCESSED
        )
    worker.join(timeout=30)
    assert done.is_set()
    assert handler.applied == ["1", "2", "3"]
    assert held.stats[Outcome.PROCESSED] == 2


def test_bulk_claim_returns_only_new_pairs_and_finish_marks_them(
    db: psycopg.Connection[Any],
) -> None:
    inbox, consumer = Inbox(), unique("consumer")
    events = [decode(record(unique("agg"), 1)) for _ in range(3)]
    with db.transaction():
        first = inbox.claim_many(db, [(e, consumer) for e in events[:2]], processed=False)
    assert first == {(e.event_id, consumer): "new" for e in events[:2]}
    with db.transaction():
        second = inbox.claim_many(db, [(e, consumer) for e in events], processed=False)
        inbox.finish_many(db, [(events[2], consumer, "PROCESSED", None)])
    # Unfinished RECEIVED rows may be claimed again (batch mode defers failures that way).
    assert second == {
        (events[0].event_id, consumer): "reclaimed",
        (events[1].event_id, consumer): "reclaimed",
        (events[2].event_id, consumer): "new",
    }
    rows = dict(
        db.execute(
            "SELECT event_id, status FROM inbox_event WHERE consumer_name = %s", (consumer,)
        ).fetchall()
    )
    assert rows == {
        events[0].event_id: "RECEIVED",
        events[1].event_id: "RECEIVED",
        events[2].event_id: "PROCESSED",
    }
    with db.transaction():
        assert inbox.claim_many(db, [(events[2], consumer)], processed=False) == {}


def test_an_event_type_no_handler_takes_is_counted_unhandled_whatever_its_bytes(
    database: str, db: psycopg.Connection[Any]
) -> None:
    handler = Counter(unique("consumer"))
    rec = record(unique("agg"), 1, event_type="SomethingElse")
    rec.value = b"\xc3\x01 not json and not a known Avro schema"
    rec.headers.append(("content-type", b"application/vnd.apache.avro+binary"))
    assert outcome_of(pipeline_for(database, handler), db, rec) == Outcome.UNHANDLED
    assert handler.applied == []


# --- parking and batch savepoints: the dead-letter topic is recorded, not published -------


@dataclass
class RecordedLetters:
    """Stands in for the DLQ producer (Kafka is tests/e2e's business): what was sent."""

    sent: list[tuple[str, str]] = field(default_factory=list)  # (aggregate, version)

    def publish(self, record: Any, **headers: Any) -> None:
        version = dict(record.headers).get("aggregate_version", b"")
        self.sent.append((record.key.decode(), version.decode()))


class FailsOn(Counter):
    """Applies every event except the versions of aggregates listed in `failing`."""

    def __init__(self, name: str, failing: set[tuple[str, int]]) -> None:
        super().__init__(name)
        self.failing = failing

    def handle(self, event: Any, conn: psycopg.Connection[Any]) -> None:
        if (event.aggregate_id, event.aggregate_version) in self.failing:
            raise RuntimeError("handler refuses this one")
        conn.execute("SELECT 1")
        self.applied.append(f"{event.aggregate_id}:{event.aggregate_version}")


def parked_aggregates(db: psycopg.Connection[Any], consumer: str) -> list[str]:
    rows = db.execute(
        "SELECT aggregate_id FROM consumer_parked_aggregate WHERE consumer_name = %s "
        "ORDER BY aggregate_id",
        (consumer,),
    ).fetchall()
    return [r[0] for r in rows]


def parking_pipeline(
    database: str, handler: Counter, letters: RecordedLetters, **options: Any
) -> RecordPipeline:
    config = ConsumerConfig(
        bootstrap_servers="unused",
        dsn=database,
        group_id=handler.consumer_name,
        retry=RetryPolicy(max_attempts=2, initial_delay_s=0.001, max_delay_s=0.002),
        **options,
    )
    return RecordPipeline(
        {t: (handler,) for t in handler.event_types},
        postgres_stores(),
        dead_letters=letters,  # type: ignore[arg-type]
        config=config,
        stats=ConsumerStats(),
        breaker=CircuitBreaker(BreakerPolicy()),
    )


def test_a_dead_lettered_event_parks_its_aggregate_for_every_member(
    database: str, db: psycopg.Connection[Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="cdcbox.consumer")
    a, b = unique("a"), unique("b")
    handler = FailsOn(unique("consumer"), {(a, 2)})
    letters = RecordedLetters()
    pipeline = parking_pipeline(database, handler, letters)
    outcomes = [
        outcome_of(pipeline, db, r)
        for r in (record(a, 1), record(a, 2), record(a, 3), record(b, 1))
    ]
    assert outcomes == [
        Outcome.PROCESSED,
        Outcome.DEAD_LETTERED,
        Outcome.PARKED,  # a's v3 follows v2 instead of being applied past it
        Outcome.PROCESSED,  # other aggregates keep flowing
    ]
    assert letters.sent == [(a, "2"), (a, "3")]
    assert handler.applied == [f"{a}:1", f"{b}:1"]
    # Every per-record line (retries, dead letters) names the event, aggregate and trace.
    per_record = [r.getMessage() for r in caplog.records if r.name == "cdcbox.consumer"]
    assert len(per_record) >= 3
    for line in per_record:
        assert f"(aggregate order/{a}, trace -)" in line, line
    assert parked_aggregates(db, handler.consumer_name) == [a]
    # Both the failed event and its follower are FAILED in the inbox: a replay applies them.
    failed = db.execute(
        "SELECT count(*) FROM inbox_event WHERE consumer_name = %s AND status = 'FAILED'",
        (handler.consumer_name,),
    ).fetchone()
    assert failed == (2,)
    # Another member (empty cache) sees the park once it refreshes, as on assignment.
    other = parking_pipeline(database, handler, letters)
    other.dead_letter.parking.refresh(db, [handler.consumer_name])
    assert outcome_of(other, db, record(a, 4)) == Outcome.PARKED
    # Released, the aggregate is applied again.
    with db.transaction():
        assert other.dead_letter.parking.release(db, handler.consumer_name, "order", a)
    assert outcome_of(other, db, record(a, 5)) == Outcome.PROCESSED


@pytest.mark.parametrize("batch_mode", [False, True], ids=["per-record", "batch"])
def test_a_held_event_applied_on_redelivery_releases_its_drained_park(
    database: str, db: psycopg.Connection[Any], batch_mode: bool
) -> None:
    """A member parked the aggregate, then lost the partition; the new owner, whose cache
    has not seen the park, gets the held event again from the committed offset and
    applies it: its commit releases the park, which would otherwise hold every later
    event of the aggregate for nothing."""
    a = unique("a")
    handler = FailsOn(unique("consumer"), {(a, 1)})
    letters = RecordedLetters()
    held = record(a, 1)
    old_owner = parking_pipeline(database, handler, letters)
    assert outcome_of(old_owner, db, held) == Outcome.DEAD_LETTERED
    handler.failing.clear()
    new_owner = parking_pipeline(database, handler, letters, batch_mode=batch_mode)
    if batch_mode:
        new_owner.process_batch(lambda: db, [held])
    else:
        assert outcome_of(new_owner, db, held) == Outcome.PROCESSED
    assert handler.applied == [f"{a}:1"]
    assert parked_aggregates(db, handler.consumer_name) == []


def test_a_failing_record_in_a_batch_defers_only_its_aggregate(
    database: str, db: psycopg.Connection[Any]
) -> None:
    a, b, c = unique("a"), unique("b"), unique("c")
    handler = FailsOn(unique("consumer"), {(b, 1)})
    letters = RecordedLetters()
    pipeline = parking_pipeline(database, handler, letters, batch_mode=True)
    pipeline.process_batch(
        lambda: db, [record(a, 1), record(b, 1), record(b, 2), record(c, 1), record(a, 2)]
    )
    # The batch was redone with a savepoint per record after b's failure (the handler saw
    # a:1 twice, the first time rolled back) and committed a and c in order; b went the
    # per-record way (retries, DLQ) and its v2 followed it.
    assert handler.applied[-3:] == [f"{a}:1", f"{c}:1", f"{a}:2"]
    assert not any(x.startswith(b) for x in handler.applied)
    assert letters.sent == [(b, "1"), (b, "2")]
    assert pipeline.stats[Outcome.PROCESSED] == 3
    assert pipeline.stats[Outcome.DEAD_LETTERED] == 1
    assert pipeline.stats[Outcome.PARKED] == 1
    statuses = dict(
        db.execute(
            "SELECT status, count(*) FROM inbox_event WHERE consumer_name = %s GROUP BY 1",
            (handler.consumer_name,),
        ).fetchall()
    )
    assert statuses == {"PROCESSED": 3, "FAILED": 2}


# --- issue 14: safety of the producer's names and of the operator's purge ------------------


def test_an_aggregate_type_cannot_write_into_a_dead_letter_topic(
    db: psycopg.Connection[Any],
) -> None:
    with db.transaction(), pytest.raises(SchemaError, match="reserved for dead-letter topics"):
        Outbox().append(db, NewEvent("order.dlq", unique("agg"), "T", {}))


def test_outbox_purge_follows_the_relay_mode_the_database_was_migrated_for(
    database: str,
) -> None:
    names = migrated_schema(database, DbNames(schema=unique("purge")))
    with psycopg.connect(database, autocommit=True) as conn:
        outbox = Outbox(names)
        with conn.transaction():
            outbox.append_many(conn, [NewEvent("order", f"a{i}", "T", {}) for i in range(3)])
        table = names.table("outbox")
        conn.execute(
            sql.SQL("UPDATE {} SET status = 'SENT' WHERE aggregate_id = 'a0'").format(table)
        )
        conn.execute(
            sql.SQL("UPDATE {} SET status = 'DEAD' WHERE aggregate_id = 'a1'").format(table)
        )
        # CDC mode on a polling database would delete unsent rows: refused.
        with pytest.raises(UsageError, match="migrated for the polling relay"):
            retention.purge_outbox(
                conn, timedelta(0), "cdc", read_until=datetime(2999, 1, 1), names=names
            )
        # Without a mode it is read from the migration ledger: only the SENT row goes.
        result = retention.purge_outbox(conn, timedelta(0), names=names)
        left = conn.execute(
            sql.SQL("SELECT aggregate_id, status FROM {} ORDER BY aggregate_id").format(table)
        ).fetchall()
    assert result.deleted == 1
    assert left == [("a1", "DEAD"), ("a2", "PENDING")]


def test_an_undecodable_event_parks_its_aggregate_like_a_handler_failure(
    database: str, db: psycopg.Connection[Any]
) -> None:
    a, b = unique("a"), unique("b")
    handler = FailsOn(unique("consumer"), set())
    letters = RecordedLetters()
    pipeline = parking_pipeline(database, handler, letters)
    bad = record(a, 1)
    bad.value = b"{not json"
    no_id = record(b, 1)
    no_id.headers = [h for h in no_id.headers if h[0] != "id"]
    outcomes = [outcome_of(pipeline, db, r) for r in (bad, record(a, 2), no_id, record(b, 2))]
    assert outcomes == [
        Outcome.DEAD_LETTERED,
        Outcome.PARKED,  # v2 is held behind the undecodable v1, not applied past it
        Outcome.DEAD_LETTERED,  # without an event id there is no event to park by
        Outcome.PROCESSED,
    ]
    assert letters.sent == [(a, "1"), (a, "2"), (b, "1")]
    assert parked_aggregates(db, handler.consumer_name) == [a]
    failed = db.execute(
        "SELECT error_message FROM inbox_event WHERE consumer_name = %s AND status = 'FAILED' "
        "ORDER BY received_at",
        (handler.consumer_name,),
    ).fetchall()
    assert len(failed) == 2
    assert "not valid JSON" in failed[0][0]


def test_a_handler_pinned_to_an_unknown_schema_version_is_refused_at_start(
    database: str,
) -> None:
    class Pinned(Counter):
        event_types = frozenset({"OrderCreated"})
        schema_version = 99

    with pytest.raises(ConfigError, match="schema_version 99"):
        pipeline_for(
            database,
            Pinned(unique("consumer")),
            schemas=Catalogue.load(resource_dir("schemas") / "avro"),
        )


def test_a_database_failure_after_the_dead_letter_publish_leaves_the_record_to_retry(
    database: str,
) -> None:
    a = unique("a")
    handler = FailsOn(unique("consumer"), {(a, 1)})
    with psycopg.connect(database, autocommit=True) as victim:
        pid = victim.info.backend_pid

        class KillsTheDatabaseConnection(RecordedLetters):
            def publish(self, record: Any, **headers: Any) -> None:
                super().publish(record, **headers)
                with psycopg.connect(database, autocommit=True) as admin:
                    admin.execute("SELECT pg_terminate_backend(%s)", (pid,))

        letters = KillsTheDatabaseConnection()
        pipeline = parking_pipeline(database, handler, letters)
        # Not an OperationalError that would stop the consumer: a DeadLetterError, which
        # the runner answers by seeking back and retrying the record later.
        with pytest.raises(DeadLetterError, match="could not record"):
            pipeline.process(lambda: victim, record(a, 1))
    assert letters.sent == [(a, "1")]


def test_hold_sees_no_gap_where_a_version_was_consumed_without_being_applied(
    database: str, db: psycopg.Connection[Any]
) -> None:
    handler = Counter(unique("consumer"))  # takes Changed and Refused, not Other
    aggregate = unique("agg")
    letters = RecordedLetters()
    pipeline = parking_pipeline(database, handler, letters, gap_policy="hold")
    outcomes = [
        outcome_of(pipeline, db, record(aggregate, v, event_type=t))
        for v, t in ((1, "Changed"), (2, "Other"), (3, "Changed"), (4, "Refused"), (5, "Changed"))
    ]
    assert outcomes == [
        Outcome.PROCESSED,
        Outcome.UNHANDLED,  # consumes version 2: not this consumer's business
        Outcome.PROCESSED,
        Outcome.REFUSED,  # consumes version 4
        Outcome.PROCESSED,
    ]
    assert handler.applied == ["1", "3", "5"]
    assert letters.sent == []


def test_the_durability_barrier_flushes_every_asynchronous_commit_before_it(
    database: str,
) -> None:
    """The consumer's session commits without waiting for the WAL flush; the barrier it
    runs before each offset commit returns only once the WAL holding them is flushed."""
    source = Reconnecting(database, synchronous_commit=False)
    conn = source()
    assert conn.execute("SHOW synchronous_commit").fetchone() == ("off",)
    table = unique("barrier")
    conn.execute(sql.SQL("CREATE TABLE {} (n int)").format(sql.Identifier(table)))
    for n in range(20):
        with conn.transaction():
            conn.execute(sql.SQL("INSERT INTO {} VALUES (%s)").format(sql.Identifier(table)), (n,))
    written = conn.execute("SELECT pg_current_wal_insert_lsn()::text").fetchone()
    assert written is not None
    durability_barrier(conn)
    flushed = conn.execute(
        "SELECT pg_current_wal_flush_lsn() >= %s::pg_lsn", (written[0],)
    ).fetchone()
    assert flushed == (True,)
    assert conn.execute("SHOW synchronous_commit").fetchone() == ("off",)
    conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(table)))
    source.close()


def test_a_session_terminated_during_barriers_never_leaves_a_stuck_connection(
    database: str,
) -> None:
    """The consumer's session is terminated, again and again, while it runs durability
    barriers (pipelined transactions). A termination that lands while a pipeline waits
    for its results left libpq in pipeline mode on a connection psycopg did not call
    broken: every later statement failed ("PQsendQuery not allowed in pipeline mode")
    and the consumer died of it (the fault suite's walsender + sessions scenario). Each
    failure must leave `Reconnecting` a connection that works, or none."""
    source = Reconnecting(database, synchronous_commit=False)
    sessions: list[int] = []  # the backend pid of each barrier's session
    stop = threading.Event()

    def terminate_repeatedly() -> None:
        with psycopg.connect(database, autocommit=True) as killer:
            while not stop.wait(0.003):
                if sessions:
                    killer.execute("SELECT pg_terminate_backend(%s)", (sessions[-1],))

    killer = threading.Thread(target=terminate_repeatedly, daemon=True)
    killer.start()
    failures: list[tuple[str, bool]] = []  # (error, left in pipeline mode and open)
    try:
        for _ in range(1500):
            conn = source()
            sessions.append(conn.info.backend_pid)
            try:
                durability_barrier(conn)
            except psycopg.Error as e:
                still_in_pipeline = not conn.closed and (
                    conn.pgconn.pipeline_status != psycopg.pq.PipelineStatus.OFF
                )
                failures.append((str(e).splitlines()[0], still_in_pipeline))
    finally:
        stop.set()
        killer.join(timeout=10)
    assert failures, "no termination landed: the test proved nothing"
    stuck = [error for error, left_in_pipeline in failures if left_in_pipeline]
    assert not stuck, f"{len(stuck)} of {len(failures)} failures left it stuck: {stuck[:3]}"
    try:
        answer = source().execute("SELECT 1").fetchone()
    except psycopg.OperationalError:
        # The killer's last termination may land after the last barrier: the client learns
        # of it at its next statement, as the consumer does, and must then get a new session.
        answer = source().execute("SELECT 1").fetchone()
    assert answer == (1,)
    source.close()


class PipelinedWriter(Handler):
    """A write-only handler that lets the record's statements travel in a pipeline; its
    write fails for an aggregate named '…-bad' (a CHECK), which surfaces only at COMMIT."""

    event_types = frozenset({"Changed"})
    aggregate_types = ("order",)
    pipelined = True

    def __init__(self, name: str, table: str) -> None:
        self.consumer_name = name
        self.table = table

    def handle(self, event: Any, conn: psycopg.Connection[Any]) -> None:
        conn.execute(
            sql.SQL("INSERT INTO {} VALUES (%s, %s)").format(sql.Identifier(self.table)),
            (event.aggregate_id, -1 if event.aggregate_id.endswith("-bad") else 1),
        )


@pytest.mark.parametrize("durable", [False, True], ids=["async-commit", "sync-commit"])
def test_a_pipelined_record_commits_with_its_claim_or_not_at_all(
    database: str, db: psycopg.Connection[Any], durable: bool
) -> None:
    table = checked_table(db)
    handler = PipelinedWriter(unique("consumer"), table)
    pipeline = pipeline_for(database, handler)
    with Reconnecting(database, synchronous_commit=durable)() as conn:
        good, bad = record(unique("agg"), 1), record(unique("agg") + "-bad", 1)
        assert pipeline.transaction.apply(conn, routed_once(pipeline, good)) == Outcome.PROCESSED
        with pytest.raises(psycopg.errors.CheckViolation):
            pipeline.transaction.apply(conn, routed_once(pipeline, bad))
        # The failed record left nothing behind, and the session is usable at once.
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        rows = conn.execute(sql.SQL("SELECT aggregate_id FROM {}").format(sql.Identifier(table)))
        assert [r[0] for r in rows] == [(good.key or b"").decode()]
        claimed = conn.execute(
            "SELECT aggregate_id FROM inbox_event WHERE consumer_name = %s",
            (handler.consumer_name,),
        ).fetchall()
        assert claimed == [((good.key or b"").decode(),)]
        # Redelivered, the applied one is a duplicate; the failed one applies once fixed.
        assert pipeline.transaction.apply(conn, routed_once(pipeline, good)) == Outcome.DUPLICATE


def test_a_pipelined_record_fails_with_its_own_error_every_time(
    database: str, db: psycopg.Connection[Any]
) -> None:
    """Leaving a pipeline, psycopg raises the failed statement's error and then, in a
    `finally`, reads the results still to come: when the later commands' PipelineAborted
    is read only then, it replaces that error (CI saw the test above fail so). The
    record's own error is what the retry step logs and a dead letter carries. Failed on
    the old code: PipelineAborted within these tries."""
    handler = PipelinedWriter(unique("consumer"), checked_table(db))
    pipeline = pipeline_for(database, handler)
    raised: dict[str, int] = {}
    with Reconnecting(database, synchronous_commit=False)() as conn:
        for _ in range(100):
            bad = record(unique("agg") + "-bad", 1)
            try:
                pipeline.transaction.apply(conn, routed_once(pipeline, bad))
            except psycopg.Error as e:
                raised[type(e).__name__] = raised.get(type(e).__name__, 0) + 1
    assert raised == {"CheckViolation": 100}


def checked_table(db: psycopg.Connection[Any]) -> str:
    """A table `PipelinedWriter` writes to, refusing its `-bad` aggregates' rows."""
    table = unique("effect")
    db.execute(
        sql.SQL("CREATE TABLE {} (aggregate_id text, n int CHECK (n >= 0))").format(
            sql.Identifier(table)
        )
    )
    db.commit()
    return table


def test_migrate_creates_the_schema_it_is_given_and_says_so(database: str) -> None:
    """Issue 52, item 4: `--schema S` on a database without S failed with PostgreSQL's
    'schema "S" does not exist'; migrate now creates it, once, and says so."""
    schema = f"fresh_{uuid.uuid4().hex[:10]}"
    runner = CliRunner()
    first = runner.invoke(
        cli, ["--dsn", database, "--schema", schema, "db", "migrate", "--no-slot"]
    )
    assert first.exit_code == 0, first.output
    assert first.output.splitlines()[0] == f"created schema {schema}"
    again = runner.invoke(
        cli, ["--dsn", database, "--schema", schema, "db", "migrate", "--no-slot"]
    )
    assert again.output.strip() == "database is up to date"
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
        conn.execute(
            sql.SQL("DROP PUBLICATION IF EXISTS {}").format(
                sql.Identifier(DbNames(schema=schema).publication)
            )
        )
