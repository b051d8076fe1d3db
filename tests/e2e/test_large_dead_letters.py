"""A record as large as its topic allows can always be dead-lettered (audit 33, case 9):
the consumer's dead-letter producer is sized for the largest record its topics take, and
the `.dlq` topic it creates takes it too. Otherwise a failing large record could never
leave its partition, which would retry it for ever."""

from __future__ import annotations

from typing import Any

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from cdcbox import wire
from cdcbox.consumer import Outcome, RetryPolicy
from cdcbox.stack.endpoints import Endpoints
from tests.e2e.topics import read_topic
from tests.helpers import eventually, unique

pytestmark = pytest.mark.e2e
TOPIC_MAX_BYTES = 3_000_000
PAYLOAD_BYTES = 2_000_000  # over Kafka's 1 MiB defaults, under the topic's limit


def test_a_record_over_kafkas_default_size_is_dead_lettered(
    stack: Endpoints, run_consumer: Any, recorder: Any
) -> None:
    aggregate_type, consumer = unique("big"), unique("c")
    topic = wire.topic_for(aggregate_type)
    admin = KafkaAdminClient(bootstrap_servers=stack.bootstrap_servers)
    try:  # a foreign producer's topic that takes large records
        admin.create_topics(
            [NewTopic(topic, 1, 1, topic_configs={"max.message.bytes": str(TOPIC_MAX_BYTES)})]
        )
    finally:
        admin.close()
    producer = KafkaProducer(
        bootstrap_servers=stack.bootstrap_servers, max_request_size=TOPIC_MAX_BYTES
    )
    try:
        producer.send(
            topic,
            key=b"a-1",
            value=b'"' + b"x" * PAYLOAD_BYTES + b'"',
            headers=[("id", b"big-1"), ("eventType", b"Created")],
        ).get(timeout=30)
    finally:
        producer.close()
    handler = recorder(consumer, aggregate_type, {"Created"}, fail=lambda e: True)
    retry = RetryPolicy(max_attempts=1, initial_delay_s=0.01, max_delay_s=0.05)
    with run_consumer([handler], group=consumer, retry=retry) as running:
        eventually(
            lambda: running.stats[Outcome.DEAD_LETTERED] == 1, timeout=60, what="dead-lettered"
        )
    (letter,) = read_topic(stack, topic + wire.DLQ_SUFFIX, expect=1, timeout=30)
    assert len(letter.value) == PAYLOAD_BYTES + 2
    assert dict(letter.headers)["cdcbox.consumer"] == consumer.encode()
