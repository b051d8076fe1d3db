"""Rebalances: kafka-python 3 completes a group join on its IO thread, and runs the
rebalance listener there, possibly while the consumer thread is in the middle of a
record's transaction. The consumer's database session must never be touched from that
thread, and an aggregate another member parked must still be held after the assignment."""

from __future__ import annotations

import threading
from functools import partial
from typing import Any

import psycopg
import pytest
from psycopg import sql

from cdcbox.consumer import Consumer, ConsumerConfig, Outcome
from cdcbox.kafka.client import Consumer as KafkaConsumer
from cdcbox.names import DbNames
from cdcbox.producer.outbox import NewEvent
from cdcbox.session import Session, SessionSource
from cdcbox.stack.endpoints import Endpoints
from tests.e2e.conftest import count_effects, recording_handler, running_in_thread
from tests.e2e.test_consumer_failures import write
from tests.helpers import eventually, unique

pytestmark = pytest.mark.e2e
PARTITIONS = 3  # of each outbox topic on the test stack


class ThreadRecordingSource:
    """The consumer's connection source, noting the name of every thread that asks it
    for the session."""

    def __init__(self, source: SessionSource) -> None:
        self.source = source
        self.threads: set[str] = set()

    def __call__(self) -> Session:
        self.threads.add(threading.current_thread().name)
        return self.source()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.source, name)  # guard, unguard, close: the source's own


def rebalance_twice(stack: Endpoints, consumer: Consumer, group: str, topic: str) -> None:
    """A second member joins (it is given partitions) and leaves again: two assignments
    for `consumer`, the last one giving it every partition back. The second member polls
    all along, as a live one does: a member that stops polling holds up every rebalance
    of its group (kafka-python may rejoin again right after a join)."""
    other = KafkaConsumer(
        consumer.config.kafka, group_id=group, client_id="rebalancer", session_timeout_ms=10_000
    )

    def shared() -> bool:
        other.poll(timeout_ms=100)
        return bool(other.assignment()) and len(consumer.assignment()) < PARTITIONS

    try:
        other.subscribe([topic])
        eventually(shared, what="the partitions shared between the two members")
    finally:
        other.close(autocommit=False)
    eventually(lambda: len(consumer.assignment()) == PARTITIONS, what="every partition back")


def test_a_partition_assignment_never_uses_the_consumer_session_from_another_thread(
    stack: Endpoints,
) -> None:
    aggregate_type, name = unique("order"), unique("c")
    handler = recording_handler(name, aggregate_type, {"Created"}, flavour="async")
    consumer = Consumer(
        [handler], ConsumerConfig(stack.bootstrap_servers, stack.dsn, group_id=name)
    )
    source = ThreadRecordingSource(consumer.connection)
    consumer.connection = source
    with running_in_thread(consumer, "the-consumer-thread"):
        eventually(consumer.assigned, what="the first assignment")
        rebalance_twice(stack, consumer, name, handler.subscribed_topics()[0])
        write(stack.dsn, [NewEvent(aggregate_type, "a1", "Created", {"n": 1})])
        eventually(lambda: consumer.stats[Outcome.PROCESSED] == 1, what="the event applied")
    # Each assignment reloaded the parked aggregates: on the consumer's own thread.
    assert source.threads == {"the-consumer-thread"}


def processed_is(consumer: Consumer, n: int) -> bool:
    return consumer.stats[Outcome.PROCESSED] == n


def assignments(consumer: Consumer) -> float:
    value = consumer.stats.metrics.registry.get_sample_value("cdcbox_consumer_assignments_total")
    return value or 0.0


def test_a_consumer_starting_alone_is_assigned_its_partitions_once(stack: Endpoints) -> None:
    """kafka-python joins before its metadata has the subscribed topics' partitions, and
    then rejoins when they arrive: a second rebalance right after the first, which takes
    back the partitions of the first poll batch (and, in a group, stops every member)."""
    aggregate_type, name = unique("order"), unique("c")
    handler = recording_handler(name, aggregate_type, {"Created"})
    consumer = Consumer(
        [handler], ConsumerConfig(stack.bootstrap_servers, stack.dsn, group_id=name)
    )
    with running_in_thread(consumer, "the-consumer-thread"):
        for n in range(1, 4):  # one poll after another: each would see the rejoin
            write(stack.dsn, [NewEvent(aggregate_type, f"a{n}", "Created", {"n": n})])
            eventually(partial(processed_is, consumer, n), what=f"event {n}")
        assert assignments(consumer) == 1


def test_an_aggregate_parked_by_another_member_is_held_after_an_assignment(
    stack: Endpoints,
) -> None:
    aggregate_type, name = unique("order"), unique("c")
    handler = recording_handler(name, aggregate_type, {"Created"})
    # No periodic reload during the test: only the assignment can make the park count.
    config = ConsumerConfig(
        stack.bootstrap_servers, stack.dsn, group_id=name, parked_refresh_s=3600
    )
    consumer = Consumer([handler], config)
    (earlier,) = write(stack.dsn, [NewEvent(aggregate_type, "held", "Created", {"n": 0})])
    with running_in_thread(consumer, "the-consumer-thread"):
        eventually(lambda: consumer.stats[Outcome.PROCESSED] == 1, what="the earlier event")
        with psycopg.connect(stack.dsn) as conn:  # as another member's dead letter would
            conn.execute(
                sql.SQL(
                    "INSERT INTO {} (consumer_name, aggregate_type, aggregate_id, event_id, "
                    "reason) VALUES (%s, %s, 'held', %s, 'parked elsewhere')"
                ).format(DbNames().table("parked")),
                (name, aggregate_type, earlier),
            )
        rebalance_twice(stack, consumer, name, handler.subscribed_topics()[0])
        write(
            stack.dsn,
            [
                NewEvent(aggregate_type, "held", "Created", {"n": 1}),
                NewEvent(aggregate_type, "free", "Created", {"n": 2}),
            ],
        )
        eventually(lambda: consumer.stats[Outcome.PROCESSED] == 2, what="the free aggregate")
        eventually(lambda: consumer.stats[Outcome.PARKED] == 1, what="the held one parked")
    assert count_effects(stack.dsn, name) == 2
