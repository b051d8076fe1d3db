"""An offset commit the broker does not answer never stops the consumer: the offsets are
kept and committed once Kafka answers; a rebalance drops them (the inbox deduplicates
what comes again)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from kafka import TopicPartition

from cdcbox.consumer import ConsumerConfig, Handler
from cdcbox.consumer.offsets import OffsetCommits
from cdcbox.consumer.runner import Consumer
from cdcbox.errors import CommitRefused, KafkaUnavailable
from cdcbox.event import Event

A, B = TopicPartition("cdcbox.order", 0), TopicPartition("cdcbox.order", 1)


class FlakyBroker:
    """A consumer client whose commits fail with the queued errors, then succeed."""

    def __init__(self, *failures: Exception) -> None:
        self.failures = list(failures)
        self.committed: dict[TopicPartition, int] = {}

    def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        if self.failures:
            raise self.failures.pop(0)
        self.committed.update(offsets)


def down() -> KafkaUnavailable:
    return KafkaUnavailable("Kafka at k:9092 is unreachable (offset commit: no answer)")


class Orders(Handler):
    consumer_name = "orders"
    aggregate_types = ("order",)
    event_types = frozenset({"Created"})

    def handle(self, event: Event, conn: Any) -> None:
        pass


def test_the_consumer_survives_a_commit_the_broker_does_not_answer() -> None:
    # Failed on the code before cdcbox.consumer.offsets: KafkaUnavailable escaped the
    # commit and the consumer process exited (seen in the broker SIGKILL fault row).
    config = ConsumerConfig(
        bootstrap_servers="k:9092", dsn="dbname=x", group_id="g", durable_each_commit=True
    )
    consumer = Consumer([Orders()], config)
    broker = FlakyBroker(down())
    consumer._batches.commit_offsets(broker, {A: []}, {A: 7})  # type: ignore[arg-type]
    assert broker.committed == {}
    consumer._offsets.retry(broker)
    assert broker.committed == {A: 7}


def test_kept_offsets_go_with_the_next_commit_which_wins_per_partition() -> None:
    commits, broker = OffsetCommits(), FlakyBroker(down(), down())
    commits.commit(broker, {A: 5, B: 3})
    commits.commit(broker, {A: 9})
    assert commits.pending == {A: 9, B: 3}
    commits.commit(broker, {B: 4})
    assert broker.committed == {A: 9, B: 4}
    assert commits.pending == {}


@pytest.mark.parametrize("event", ["refused", "reassigned"])
def test_a_rebalance_drops_the_kept_offsets(event: str) -> None:
    commits = OffsetCommits()
    commits.commit(FlakyBroker(down()), {A: 5})
    assert commits.pending == {A: 5}
    if event == "refused":
        commits.commit(FlakyBroker(CommitRefused("rebalanced", kind="CommitFailedError")), {B: 2})
    else:
        commits.reassigned()
        broker = FlakyBroker()
        commits.commit(broker, {B: 2})
        assert broker.committed == {B: 2}
    assert commits.pending == {}


def test_nothing_to_retry_sends_nothing() -> None:
    commits, broker = OffsetCommits(), FlakyBroker(down())
    commits.retry(broker)
    assert broker.failures  # no commit was attempted
