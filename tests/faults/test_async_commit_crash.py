"""A PostgreSQL crash with asynchronous commits in flight (audit 26, case 2). The consumer's
COMMITs do not wait for their WAL flush; one durability barrier before the offset commit
makes them durable. If the session changes during a batch (the old one died with the
server), the barrier on the new session proves nothing for the commits of the old one,
which the crash may have lost: the batch must be processed again, not its offsets
committed. The crash is real: the WAL writer is stopped so the first commits stay in
PostgreSQL's buffers, then killed, which makes the postmaster restart every process and
recover from what reached the WAL files."""

from __future__ import annotations

import os
import signal
from typing import Any

import psycopg
import pytest

from cdcbox import wire
from cdcbox.connect.client import ConnectClient
from cdcbox.consumer import Consumer, ConsumerConfig, Event, Handler, RetryPolicy
from cdcbox.consumer.steps.transaction import RecordTransaction
from cdcbox.kafka.client import KafkaSettings
from cdcbox.ops.groups import committed
from cdcbox.producer import NewEvent, Outbox
from cdcbox.stack.endpoints import Endpoints
from tests.e2e.conftest import (
    EFFECTS_DDL,
    INSERT_EFFECT,
    count_effects,
    effect_row,
    running_in_thread,
)
from tests.faults.conftest import answering, connector_running, walwriter_pid
from tests.faults.ledger import delivered_ids, past_last_records
from tests.helpers import eventually, unique

pytestmark = [pytest.mark.e2e, pytest.mark.faults, pytest.mark.timeout(300)]


def session_gone(conn: psycopg.Connection[Any]) -> bool:
    try:
        conn.execute("SELECT 1")
    except psycopg.OperationalError:
        return True
    return False


def stop_the_wal_writer(dsn: str, stopped: list[int]) -> None:
    """From here on, asynchronous COMMITs stay in PostgreSQL's WAL buffers; its pid is
    appended to `stopped` (a second element says it was killed)."""
    stopped.append(walwriter_pid(dsn))
    os.kill(stopped[0], signal.SIGSTOP)


def recover(stack: Endpoints, connect_client: ConnectClient, stopped: list[int]) -> None:
    """After the test, whatever it did: the WAL writer going again, PostgreSQL answering
    and the connector running."""
    if len(stopped) == 1:  # the test failed between the stop and the kill
        os.kill(stopped[0], signal.SIGCONT)
    eventually(answering(lambda: walwriter_pid(stack.dsn) > 0), timeout=60, what="recovery")
    connector_running(connect_client)


def test_commits_lost_in_a_crash_before_the_barrier_are_applied_again(
    stack: Endpoints, connect_client: ConnectClient
) -> None:
    """With the session check off (the old code), the barrier on the new session lets the
    offsets pass the two commits the crash lost: their effects never come (shown by the
    fault ledger's safeguard-off run, test_ledger_database.py, and by this test on the
    old code: 1 effect of 3, the offsets committed past all three)."""
    with psycopg.connect(stack.dsn) as conn:
        conn.execute(EFFECTS_DDL)
    aggregate, name = unique("crash"), unique("c")
    stopped: list[int] = []

    class CrashingRecorder(Handler):
        consumer_name = name
        aggregate_types = (aggregate,)
        event_types = frozenset({"Changed"})

        def handle(self, event: Event, conn: psycopg.Connection[Any]) -> None:
            if event.aggregate_version == 1 and not stopped:
                stop_the_wal_writer(stack.dsn, stopped)
            if event.aggregate_version == 3 and len(stopped) == 1:
                stopped.append(0)
                os.kill(stopped[0], signal.SIGKILL)  # the postmaster restarts everything
                eventually(lambda: session_gone(conn), timeout=30, what="the crash")
                raise RuntimeError("the server crashed under this record")
            conn.execute(INSERT_EFFECT, effect_row(name, event))

    with psycopg.connect(stack.dsn) as conn, conn.transaction():
        Outbox().append_many(
            conn, [NewEvent(aggregate, "a1", "Changed", {"n": v}, v) for v in (1, 2, 3)]
        )
    config = ConsumerConfig(
        bootstrap_servers=stack.bootstrap_servers,
        dsn=stack.dsn,
        group_id=name,
        # Enough attempts for the crash recovery whatever the outage handling does.
        retry=RetryPolicy(max_attempts=100, initial_delay_s=0.2, max_delay_s=1.0),
    )
    kafka = KafkaSettings(stack.bootstrap_servers)
    topic = wire.topic_for(aggregate)
    try:
        with running_in_thread(Consumer([CrashingRecorder()], config), f"consumer-{name}"):
            eventually(lambda: len(stopped) == 2, timeout=120, what="the crash under v3")
            # Past every record committed: the consumer is done with the batch.
            eventually(
                lambda: committed(kafka, name) == past_last_records(kafka.bootstrap_servers, topic),
                timeout=60,
                what="the batch's offsets committed",
            )
            # the commits the crash lost were applied again
            assert count_effects(stack.dsn, name) == 3
    finally:
        recover(stack, connect_client, stopped)


def test_a_crash_first_met_by_an_unhandled_event_type_redoes_the_whole_batch(
    stack: Endpoints, connect_client: ConnectClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Audit 33, case 1: v1 and v2 handled (their COMMITs unflushed), then the server
    crashes and the first statement on the dead session is v3's, an event type this
    consumer does not take (its version consumed outside any retry). The old code rewound
    only to v3, opened a new session for the next batch and committed the offsets past
    v1 and v2, whose commits the crash lost: 0 effects of 2."""
    with psycopg.connect(stack.dsn) as conn:
        conn.execute(EFFECTS_DDL)
    aggregate, name = unique("crash"), unique("c")
    stopped: list[int] = []

    class Recorder(Handler):
        consumer_name = name
        aggregate_types = (aggregate,)
        event_types = frozenset({"Changed"})

        def handle(self, event: Event, conn: psycopg.Connection[Any]) -> None:
            if not stopped:
                stop_the_wal_writer(stack.dsn, stopped)
            conn.execute(INSERT_EFFECT, effect_row(name, event))

    consume_unhandled = RecordTransaction.consume_unhandled

    def crash_first(
        self: RecordTransaction, conn: psycopg.Connection[Any], event: Event, consumers: list[str]
    ) -> None:
        if len(stopped) == 1:
            stopped.append(0)
            os.kill(stopped[0], signal.SIGKILL)  # the postmaster restarts everything
            eventually(lambda: session_gone(conn), timeout=30, what="the crash")
        consume_unhandled(self, conn, event, consumers)

    monkeypatch.setattr(RecordTransaction, "consume_unhandled", crash_first)
    with psycopg.connect(stack.dsn) as conn, conn.transaction():
        Outbox().append_many(
            conn,
            [
                NewEvent(aggregate, "a1", "Changed", {"n": 1}, 1),
                NewEvent(aggregate, "a1", "Changed", {"n": 2}, 2),
                NewEvent(aggregate, "a1", "NotTakenHere", {"n": 3}, 3),
            ],
        )
    config = ConsumerConfig(
        bootstrap_servers=stack.bootstrap_servers,
        dsn=stack.dsn,
        group_id=name,
        retry=RetryPolicy(max_attempts=100, initial_delay_s=0.2, max_delay_s=1.0),
    )
    kafka = KafkaSettings(stack.bootstrap_servers)
    topic = wire.topic_for(aggregate)
    # All three on the topic before the consumer's first poll: one batch.
    eventually(lambda: len(delivered_ids(stack.bootstrap_servers, topic)) == 3, what="3 records")
    try:
        with running_in_thread(Consumer([Recorder()], config), f"consumer-{name}"):
            eventually(lambda: len(stopped) == 2, timeout=120, what="the crash before v3")
            eventually(
                lambda: committed(kafka, name) == past_last_records(kafka.bootstrap_servers, topic),
                timeout=60,
                what="the batch's offsets committed",
            )
            assert count_effects(stack.dsn, name) == 2
    finally:
        recover(stack, connect_client, stopped)
