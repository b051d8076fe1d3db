"""Batch mode applies a poll batch in one transaction, whatever partitions its records
came from (as `consume --batch` says: one transaction per poll batch). Until issue 38
the consumer ran one transaction per partition of a poll batch: three transactions and
their fixed statements a poll on a three-partition topic, which the relay benchmark's
consumer paid on every poll (`bench/consumer_cycle.py`)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from psycopg import sql

from cdcbox import wire
from cdcbox.consumer import Event, Handler, Outcome
from cdcbox.producer import NewEvent, Outbox
from cdcbox.stack.endpoints import Endpoints
from tests.e2e.topics import read_topic
from tests.helpers import eventually, unique

pytestmark = pytest.mark.e2e

EVENTS = 60


def transaction_recorder(name: str, aggregate_type: str, table: str) -> Handler:
    """A handler recording which transaction applied each event."""

    class TransactionRecorder(Handler):
        consumer_name = name
        aggregate_types = (aggregate_type,)
        event_types = frozenset({"Created"})

        def handle(self, event: Event, conn: psycopg.Connection[Any]) -> None:
            conn.execute(
                sql.SQL("INSERT INTO {} VALUES (%s, txid_current())").format(sql.Identifier(table)),
                (event.aggregate_id,),
            )

    return TransactionRecorder()


def test_a_poll_batch_across_partitions_commits_in_one_transaction(
    stack: Endpoints, run_consumer: Any
) -> None:
    aggregate_type, consumer, table = unique("order"), unique("c"), unique("tx")
    with psycopg.connect(stack.dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE TABLE {} (aggregate_id text, txid bigint)").format(
                sql.Identifier(table)
            )
        )
    with psycopg.connect(stack.dsn) as conn, conn.transaction():
        Outbox().append_many(
            conn,
            [NewEvent(aggregate_type, f"a{i % 12}", "Created", {"i": i}) for i in range(EVENTS)],
        )
    # Everything on the topic before the consumer starts: its first polls bring records
    # of every partition together.
    on_topic = read_topic(stack, wire.topic_for(aggregate_type), EVENTS)
    partition_of = {record.key.decode(): record.partition for record in on_topic}
    assert len(set(partition_of.values())) > 1, "the aggregates span partitions"
    handler = transaction_recorder(consumer, aggregate_type, table)
    with run_consumer([handler], group=consumer, batch_mode=True) as running:
        eventually(lambda: running.stats[Outcome.PROCESSED] == EVENTS, what="every event applied")
    with psycopg.connect(stack.dsn) as conn:
        applied = conn.execute(
            sql.SQL("SELECT aggregate_id, txid FROM {}").format(sql.Identifier(table))
        ).fetchall()
    partitions_by_transaction: dict[int, set[int]] = {}
    for aggregate_id, txid in applied:
        partitions_by_transaction.setdefault(txid, set()).add(partition_of[aggregate_id])
    assert len(applied) == EVENTS
    assert max(len(p) for p in partitions_by_transaction.values()) > 1, partitions_by_transaction
