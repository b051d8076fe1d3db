"""The dead-letter topics (`<topic>.dlq`): what a dead letter carries, publishing one,
reading them back and replaying them.

The original key, value and headers travel unchanged, so a replay puts the very same
event back (same event id: the inbox dedupes whatever was applied after all, and
re-applies what failed, whose inbox row is FAILED); error headers say why and from where,
and a replayed copy names the consumer it is for (see `replay`). A letter describes
itself: it carries the event as its consumer decoded it (`LETTER_HEADERS`: the id as
written, the inbox key, the aggregate), so a replay needs no handler code whatever the
producer's wire format.
A publish is awaited: if it fails, the consumer must not commit the record's offset.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from cdcbox import wire
from cdcbox.errors import CdcboxError, UsageError
from cdcbox.event import Event
from cdcbox.kafka.client import Consumer, KafkaSettings, Producer, TopicPartition
from cdcbox.kafka.records import RecordSink
from cdcbox.limits import EventLimits
from cdcbox.names import DbNames
from cdcbox.postgres.parking import Parking
from cdcbox.seam.stores import ParkedKey, ParkingStore
from cdcbox.session import Session
from cdcbox.wire import ConsumedRecord

ERROR_HEADERS = (
    "cdcbox.error.type",
    "cdcbox.error.message",
    "cdcbox.error.attempts",
    "cdcbox.original.topic",
    "cdcbox.original.partition",
    "cdcbox.original.offset",
    "cdcbox.consumer",
)


# What the consumer decoded, on a letter whose event it could decode.
HEADER_LETTER_EVENT_ID = "cdcbox.event.id"
HEADER_LETTER_INBOX_KEY = "cdcbox.inbox.key"
HEADER_LETTER_AGGREGATE_TYPE = "cdcbox.aggregate.type"
HEADER_LETTER_AGGREGATE_ID = "cdcbox.aggregate.id"
LETTER_HEADERS = (
    HEADER_LETTER_EVENT_ID,
    HEADER_LETTER_INBOX_KEY,
    HEADER_LETTER_AGGREGATE_TYPE,
    HEADER_LETTER_AGGREGATE_ID,
)
REPLAY_HEADERS = (wire.HEADER_REPLAY_FOR, wire.HEADER_REPLAY_HOPS)
# Headers of the dead-letter topic only: a replayed or requeued copy goes without them.
DLQ_ONLY_HEADERS = ERROR_HEADERS + LETTER_HEADERS + REPLAY_HEADERS


def replay_headers(
    headers: Sequence[tuple[str, bytes | None]], consumer: str, hops: int
) -> list[tuple[str, bytes]]:
    """The original headers, addressed to `consumer` as a replayed copy."""
    kept = [(k, v or b"") for k, v in headers if k not in DLQ_ONLY_HEADERS]
    return [
        *kept,
        (wire.HEADER_REPLAY_FOR, consumer.encode()),
        (wire.HEADER_REPLAY_HOPS, str(hops).encode()),
    ]


class DeadLetterError(CdcboxError, RuntimeError):
    """The dead-letter topic could not be written; the record stays uncommitted."""


class DeadLetterPublisher:
    """Writes a record that cannot be applied to its topic's DLQ and waits for the ack."""

    def __init__(
        self, producer: RecordSink, suffix: str = wire.DLQ_SUFFIX, timeout_s: float = 30
    ) -> None:
        self.producer = producer
        self.suffix = suffix
        self.timeout_s = timeout_s

    def requeue(self, record: ConsumedRecord, consumer: str, hops: int) -> None:
        """Put a held event back at the end of its own partition, addressed to `consumer`:
        it goes behind the replayed events it must not overtake."""
        headers = replay_headers(list(record.headers or []), consumer, hops)
        try:
            self.producer.send(
                record.topic, key=record.key, value=record.value, headers=headers
            ).get(timeout=self.timeout_s)
        except CdcboxError as e:
            raise DeadLetterError(
                f"cannot requeue {record.topic}[{record.partition}]@{record.offset}: {e}"
            ) from e

    def publish(
        self,
        record: ConsumedRecord,
        *,
        error_type: str,
        message: str,
        attempts: int,
        consumer: str,
        event: Event | None = None,
    ) -> None:
        """Publish `record` with why it failed and, when its `event` was decoded, what
        the consumer read of it (`LETTER_HEADERS`)."""
        # kafka-python cannot write null header values; an absent value travels as b"".
        original = [(k, v or b"") for k, v in (record.headers or []) if k not in DLQ_ONLY_HEADERS]
        extra = zip(
            ERROR_HEADERS,
            (
                error_type,
                message[:4000],
                str(attempts),
                record.topic,
                str(record.partition),
                str(record.offset),
                consumer,
            ),
            strict=True,
        )
        headers = original + [(k, v.encode()) for k, v in extra]
        if event is not None:
            described = (
                event.id_text,
                str(event.event_id),
                event.aggregate_type,
                event.aggregate_id,
            )
            headers += [(k, v.encode()) for k, v in zip(LETTER_HEADERS, described, strict=True)]
        try:
            self.producer.send(
                record.topic + self.suffix, key=record.key, value=record.value, headers=headers
            ).get(timeout=self.timeout_s)
        except CdcboxError as e:
            raise DeadLetterError(
                f"cannot publish {record.topic}[{record.partition}]@{record.offset} to "
                f"{record.topic + self.suffix}: {e}"
            ) from e


@dataclass(frozen=True)
class DeadLetter:
    """One record of a dead-letter topic: the original key, value and headers, and why."""

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
        """The event id as its producer wrote it (as the consumer's wire format read it;
        the contract's `id` header on letters that do not say)."""
        return self.header(HEADER_LETTER_EVENT_ID) or self.header(wire.HEADER_EVENT_ID)

    @property
    def inbox_key(self) -> str:
        """The consumer's inbox key of the event ("" when it is not known: a record
        whose envelope could not be decoded)."""
        key = self.header(HEADER_LETTER_INBOX_KEY)
        if key:
            return key
        try:
            return str(uuid.UUID(self.event_id))
        except ValueError:
            return ""

    @property
    def aggregate_type(self) -> str:
        return self.header(HEADER_LETTER_AGGREGATE_TYPE) or self.header(wire.HEADER_AGGREGATE_TYPE)

    @property
    def aggregate_id(self) -> str:
        return self.header(HEADER_LETTER_AGGREGATE_ID) or (self.key or b"").decode(errors="replace")

    @property
    def size(self) -> int:
        """The record's bytes as Kafka counts them (key, value, headers), about."""
        headers = sum(len(k) + len(v) for k, v in self.headers)
        return len(self.key or b"") + len(self.value or b"") + headers

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


def read(kafka: KafkaSettings, topic: str) -> list[DeadLetter]:
    """Every record currently in the dead-letter topic, in partition/offset order."""
    with Consumer(kafka, group_id=None) as reader:
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


def select(letters: list[DeadLetter], event_ids: set[str] | None) -> list[DeadLetter]:
    """The letters with these event ids (all of them for None), refusing an unknown id."""
    if event_ids is None:
        return letters
    missing = event_ids - {d.event_id for d in letters}
    if missing:
        raise UsageError(f"no dead letter with event id {', '.join(sorted(missing))}")
    return [d for d in letters if d.event_id in event_ids]


def replay(
    kafka: KafkaSettings,
    letters: list[DeadLetter],
    progress: Callable[[int], None] = lambda n: None,
    parked_in: Session | None = None,
    names: DbNames = DbNames(),
    parking: ParkingStore | None = None,
) -> int:
    """Republish to the original topics in dead-letter order, awaiting each
    acknowledgement; returns the count.

    Each copy is addressed to the consumer that dead-lettered it (`HEADER_REPLAY_FOR`):
    that consumer applies it although the aggregate is parked, once no earlier event of
    the aggregate is still held, and the commit that applies the aggregate's last held
    event releases the park. With `parked_in`, the aggregates are then marked as
    replaying, so their live events are requeued behind the copies rather than
    dead-lettered. An aggregate's events are thus applied in order, and replaying only
    some of them leaves the rest held.
    """
    largest = max((letter.size for letter in letters), default=0)
    with Producer(
        kafka,
        enable_idempotence=True,
        max_request_size=EventLimits().dead_letter_max_request_size(largest),
    ) as producer:
        return replay_with(producer, letters, progress, parked_in, names, parking)


def replay_with(
    producer: RecordSink,
    letters: list[DeadLetter],
    progress: Callable[[int], None] = lambda n: None,
    parked_in: Session | None = None,
    names: DbNames = DbNames(),
    parking: ParkingStore | None = None,
) -> int:
    """`replay` through `producer` (the test harness's topics, or a producer of Kafka);
    the parked aggregates are marked in `parked_in` through `parking` (by default the
    PostgreSQL table of `names`)."""
    _check_replayable(letters)
    count = republish(producer, letters, progress)
    if parked_in is not None:
        with parked_in.transaction():
            ids = [d.inbox_key for d in letters if d.inbox_key]
            (parking or Parking(names)).mark_replaying(parked_in, parked_keys(letters), ids)
    return count


def parked_keys(letters: list[DeadLetter]) -> list[ParkedKey]:
    """The aggregates the letters' consumers parked (a letter with no known aggregate
    parked nothing)."""
    keys = {
        (d.header("cdcbox.consumer"), d.aggregate_type, d.aggregate_id)
        for d in letters
        if d.aggregate_type
    }
    return sorted(keys)


def _check_replayable(letters: list[DeadLetter]) -> None:
    for letter in letters:
        if not letter.original_topic:
            raise UsageError(
                f"dead letter {letter.partition}@{letter.offset} has no "
                "cdcbox.original.topic header; cannot tell where it belongs"
            )


def republish(
    producer: RecordSink,
    letters: list[DeadLetter],
    progress: Callable[[int], None] = lambda n: None,
) -> int:
    """Send each letter back to its original topic as a copy addressed to the consumer
    that dead-lettered it, awaiting each acknowledgement, in the order given. One event
    dead-lettered by two consumers is two letters and two copies; the same consumer's
    letter twice (published again after a failed record) is one copy."""
    seen: set[tuple[str, str]] = set()
    for letter in letters:
        consumer = letter.header("cdcbox.consumer")
        # A letter with no id at all is its own event.
        identity = letter.inbox_key or letter.event_id or f"{letter.partition}@{letter.offset}"
        if (identity, consumer) in seen:
            continue
        seen.add((identity, consumer))
        headers = replay_headers(letter.headers, consumer, hops=0)
        producer.send(
            letter.original_topic, key=letter.key, value=letter.value, headers=headers
        ).get(timeout=30)
        progress(1)
    return len(seen)
