"""A consumer down longer than its topic's retention: the records it never read are gone.
That is detected and reported (exit 1, the partitions and how many records), never
skipped silently by jumping to the oldest record left."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest
from kafka import KafkaAdminClient, KafkaConsumer, TopicPartition

from cdcbox import wire
from cdcbox.producer.outbox import NewEvent, Outbox
from cdcbox.stack.endpoints import Endpoints
from tests.faults import ledger
from tests.faults.effects import EFFECTS_DDL, applied_ids
from tests.faults.scenario import consumer_group
from tests.helpers import eventually, unique

pytestmark = [pytest.mark.e2e, pytest.mark.faults]


def write(dsn: str, aggregate_type: str, first: int, count: int) -> None:
    with psycopg.connect(dsn) as conn, conn.transaction():
        Outbox().append_many(
            conn,
            [
                NewEvent(aggregate_type, f"a{n % 5}", "Changed", {"n": n})
                for n in range(first, first + count)
            ],
        )


def delete_up_to_end(bootstrap_servers: str, topic: str) -> None:
    """What retention does to old segments: move each partition's log start offset past
    every record on it (DeleteRecords)."""
    reader = KafkaConsumer(bootstrap_servers=bootstrap_servers, group_id=None)
    partitions = [TopicPartition(topic, p) for p in reader.partitions_for_topic(topic) or ()]
    end = reader.end_offsets(partitions)
    reader.close()
    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers)
    try:
        admin.delete_records(end)
    finally:
        admin.close()


def test_a_consumer_whose_unread_records_retention_deleted_stops_and_says_so(
    stack: Endpoints, tmp_path: Path
) -> None:
    with psycopg.connect(stack.dsn) as conn:
        conn.execute(EFFECTS_DDL)
    aggregate_type = unique("retained")
    topic = wire.topic_for(aggregate_type)
    consumer = unique("late")
    group = consumer_group(stack, tmp_path, aggregate_type, consumer)
    write(stack.dsn, aggregate_type, 0, 30)
    group.start(1)
    eventually(
        lambda: len(applied_ids(stack.dsn, consumer)) == 30,
        timeout=120,
        what="the first 30 applied",
    )
    group.stop()  # down, with its offsets committed

    write(stack.dsn, aggregate_type, 30, 30)
    eventually(
        lambda: len(ledger.delivered_ids(stack.bootstrap_servers, topic)) == 60,
        timeout=60,
        what="30 more on the topic while it is down",
    )
    delete_up_to_end(stack.bootstrap_servers, topic)  # retention outran the consumer

    group.start(1)
    late = group.procs[-1]
    assert late.wait(timeout=120) == 1, group.logs()
    error = group.logs().strip().splitlines()[-1]
    assert error.startswith("error: the group's position is no longer on the topic")
    assert "records deleted unread" in error
    assert "Traceback" not in group.logs()
    assert len(applied_ids(stack.dsn, consumer)) == 30  # nothing else applied
