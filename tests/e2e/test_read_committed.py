"""Every consumer cdcbox creates reads only committed records (issue 41, item 3): with
Kafka Connect's exactly-once source support (or any transactional producer), records of
an aborted transaction stay in the log, and a `read_uncommitted` reader would see them:
the consumer framework would apply them, and the dead-letter and replay tools would list
and republish them."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest
from kafka import KafkaProducer

from cdcbox import wire
from cdcbox.consumer import Outcome
from cdcbox.kafka import dlq
from cdcbox.kafka.client import KafkaSettings
from cdcbox.stack.endpoints import Endpoints
from tests.e2e.conftest import effects
from tests.helpers import eventually, unique

pytestmark = pytest.mark.e2e


def record_headers(event_id: uuid.UUID) -> list[tuple[str, bytes]]:
    return [
        (wire.HEADER_EVENT_ID, str(event_id).encode()),
        (wire.HEADER_EVENT_TYPE, b"Created"),
        (wire.HEADER_CONTENT_TYPE, wire.CONTENT_TYPE_JSON.encode()),
    ]


def applied_ids(stack: Endpoints, consumer: str) -> list[uuid.UUID]:
    with psycopg.connect(stack.dsn) as conn:
        return [row[0] for row in effects(conn, consumer)]


def one_aborted_then_one_committed(stack: Endpoints, topic: str) -> uuid.UUID:
    """An aborted transaction's record, then a committed one's; the committed id."""
    producer = KafkaProducer(
        bootstrap_servers=stack.bootstrap_servers, transactional_id=unique("txn")
    )
    try:
        producer.init_transactions()
        producer.begin_transaction()
        producer.send(topic, key=b"a-1", value=b"{}", headers=record_headers(uuid.uuid4()))
        producer.flush()
        producer.abort_transaction()
        committed = uuid.uuid4()
        producer.begin_transaction()
        producer.send(topic, key=b"a-1", value=b"{}", headers=record_headers(committed))
        producer.commit_transaction()
    finally:
        producer.close()
    return committed


def test_the_consumer_applies_no_record_of_an_aborted_transaction(
    stack: Endpoints, run_consumer: Any, recorder: Any
) -> None:
    aggregate_type, consumer = unique("txn"), unique("c")
    committed = one_aborted_then_one_committed(stack, wire.topic_for(aggregate_type))
    handler = recorder(consumer, aggregate_type, {"Created"})
    with run_consumer([handler], group=consumer, auto_offset_reset="earliest") as running:
        # The aborted record comes first in the partition: read, it is applied before.
        eventually(lambda: committed in applied_ids(stack, consumer), what="the committed one")
    assert running.stats[Outcome.PROCESSED] == 1
    assert applied_ids(stack, consumer) == [committed]


def test_the_dead_letter_tools_list_no_record_of_an_aborted_transaction(
    stack: Endpoints,
) -> None:
    topic = unique("letters") + wire.DLQ_SUFFIX
    committed = one_aborted_then_one_committed(stack, topic)
    letters = dlq.read(KafkaSettings(stack.bootstrap_servers), topic)
    assert [d.event_id for d in letters] == [str(committed)]
