"""Reading and replaying dead-letter topics.

Replay republishes a dead letter to its original topic with the same key, value and
headers (minus the error headers), so the event id is unchanged: the inbox dedupes
whatever was applied after all, and re-applies what failed (its inbox row is FAILED).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaError

from cdcbox.consumer.dead_letter import ERROR_HEADERS
from cdcbox.errors import ServiceUnavailable, UsageError


@dataclass(frozen=True)
class DeadLetter:
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes]]

    def header(self, name: str) -> str:
        for k, v in self.headers:
            if k == name:
                return (v or b"").decode(errors="replace")
        return ""

    @property
    def event_id(self) -> str:
        return self.header("id")

    @property
    def original_topic(self) -> str:
        return self.header("cdcbox.original.topic")

    def summary(self) -> dict[str, Any]:
        return {
            "partition": self.partition,
            "offset": self.offset,
            "event_id": self.event_id,
            "event_type": self.header("event_type"),
            "aggregate": (self.key or b"").decode(errors="replace"),
            "consumer": self.header("cdcbox.consumer"),
            "error": self.header("cdcbox.error.type"),
            "message": self.header("cdcbox.error.message"),
            "original_topic": self.original_topic,
        }


@contextmanager
def _kafka(factory: Callable[[], Any], bootstrap: str) -> Iterator[Any]:
    try:
        client = factory()
    except KafkaError as e:
        raise ServiceUnavailable(f"Kafka at {bootstrap} is unreachable: {e}") from e
    try:
        yield client
    finally:
        client.close()


def read(bootstrap: str, topic: str) -> list[DeadLetter]:
    """Every record currently in the dead-letter topic, in partition/offset order."""

    def factory() -> KafkaConsumer:
        return KafkaConsumer(bootstrap_servers=bootstrap, group_id=None, enable_auto_commit=False)

    with _kafka(factory, bootstrap) as reader:
        ids = reader.partitions_for_topic(topic)
        if not ids:
            raise UsageError(f"no topic {topic!r} (dead-letter topics are <topic>.dlq)")
        partitions = [TopicPartition(topic, p) for p in sorted(ids)]
        reader.assign(partitions)
        reader.seek_to_beginning(*partitions)
        ends = reader.end_offsets(partitions)
        letters: list[DeadLetter] = []
        while any(reader.position(tp) < ends[tp] for tp in partitions):
            for records in reader.poll(timeout_ms=1000).values():
                letters += [
                    DeadLetter(
                        r.partition, r.offset, r.key, r.value, [(k, v or b"") for k, v in r.headers]
                    )
                    for r in records
                ]
    return sorted(letters, key=lambda d: (d.partition, d.offset))


def replay(
    bootstrap: str, letters: list[DeadLetter], progress: Callable[[int], None] = lambda n: None
) -> int:
    """Republish to the original topics, awaiting each acknowledgement; returns the count."""

    def factory() -> KafkaProducer:
        return KafkaProducer(bootstrap_servers=bootstrap, acks="all", enable_idempotence=True)

    with _kafka(factory, bootstrap) as producer:
        for letter in letters:
            if not letter.original_topic:
                raise UsageError(
                    f"dead letter {letter.partition}@{letter.offset} has no "
                    "cdcbox.original.topic header; cannot tell where it belongs"
                )
            headers = [(k, v) for k, v in letter.headers if k not in ERROR_HEADERS]
            try:
                producer.send(
                    letter.original_topic, key=letter.key, value=letter.value, headers=headers
                ).get(timeout=30)
            except KafkaError as e:
                raise ServiceUnavailable(f"replay to {letter.original_topic} failed: {e}") from e
            progress(1)
    return len(letters)
