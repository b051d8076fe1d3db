"""Pausing a partition and resuming it returns every record of it (audit 33, case 12).

kafka-python 3 parks the parsed records of a partition paused while they wait to be
returned, and restores them only when no other partition's records are in line; a
drained batch of another partition stays in line for good, so the resumed partition was
never fetched again: a retry wait (which pauses) left it unconsumed, until a rebalance.
The consumer adapter drops such parked records, which are fetched again from the
partition's position."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import NewTopic

from cdcbox.kafka.client import Consumer, KafkaSettings, TopicPartition
from cdcbox.stack.endpoints import Endpoints
from tests.helpers import eventually, unique

pytestmark = pytest.mark.e2e


def test_a_partition_paused_while_its_records_wait_is_read_to_its_end_once_resumed(
    stack: Endpoints,
) -> None:
    topic = unique("paused")
    admin = KafkaAdminClient(bootstrap_servers=stack.bootstrap_servers)
    try:
        admin.create_topics([NewTopic(topic, 2, 1)])
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=stack.bootstrap_servers)
    try:
        for partition in (0, 1):
            for n in range(5):
                producer.send(topic, value=b"%d" % n, partition=partition).get(timeout=30)
    finally:
        producer.close()
    a, b = TopicPartition(topic, 0), TopicPartition(topic, 1)
    with Consumer(
        KafkaSettings(stack.bootstrap_servers), group_id=None, max_poll_records=1
    ) as consumer:
        consumer.assign([a, b])
        consumer.seek_to_beginning(a, b)
        seen: dict[int, list[int]] = {0: [], 1: []}

        def read_until(done: Callable[[], bool]) -> bool:
            for tp, records in consumer.poll(500).items():
                seen[tp.partition] += [r.offset for r in records]
            return done()

        # The first record of one partition, its others in line behind it.
        eventually(lambda: read_until(lambda: any(seen.values())), what="a record")
        first = a if seen[0] else b
        consumer.pause({first})  # its records in line are parked
        other = b if first == a else a
        eventually(
            lambda: read_until(lambda: len(seen[other.partition]) == 5),
            what="the other partition read to its end",
        )
        consumer.resume({first})
        eventually(
            lambda: read_until(lambda: len(seen[first.partition]) == 5),
            timeout=20,
            what=f"the resumed partition {first.partition} read to its end",
        )
    assert seen == {0: [0, 1, 2, 3, 4], 1: [0, 1, 2, 3, 4]}
