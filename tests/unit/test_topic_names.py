"""Topic names Kafka takes for one, and a stuck connector's culprit matched by its whole
topic name (audit 26, case 10)."""

from __future__ import annotations

import pytest

from cdcbox.kafka.topics import colliding_topics
from cdcbox.ops.quarantine import _is_culprit
from cdcbox.relay.records import KafkaRecord

pytestmark = pytest.mark.unit


def test_topics_that_differ_only_in_dot_and_underscore_collide() -> None:
    topics = [
        "outbox.event.Order.Line",
        "outbox.event.Order_Line",
        "outbox.event.Order.dlq",
        "outbox.event.Order_dlq",
        "outbox.event.Invoice",
    ]
    assert colliding_topics(topics) == [
        ["outbox.event.Order.Line", "outbox.event.Order_Line"],
        ["outbox.event.Order.dlq", "outbox.event.Order_dlq"],
    ]
    assert colliding_topics(["outbox.event.A", "outbox.event.B"]) == []


def record(topic: str) -> KafkaRecord:
    return KafkaRecord(topic=topic, key=b"k", value=b"{}", headers=[], timestamp_ms=0)


@pytest.mark.parametrize(
    ("topic", "culprit"),
    [
        ("outbox.event.Order", False),  # only a prefix of the topic the error names
        ("event.OrderLine", False),  # only a suffix of it
        ("outbox.event.OrderLine", True),
    ],
)
def test_the_culprit_is_the_record_whose_whole_topic_the_error_names(
    topic: str, culprit: bool
) -> None:
    error = (
        "org.apache.kafka.common.errors.TopicAuthorizationException: Not authorized to "
        "access topics: [outbox.event.OrderLine]"
    )
    assert _is_culprit(record(topic), error) is culprit
