"""The one Kafka adapter: every consumer, producer and admin client (`cdcbox.kafka.admin`)
cdcbox uses is built from one `KafkaSettings`, and every call on them goes through
`translated` (`cdcbox.kafka.base`), so a kafka-python error reaches the caller as a
`CdcboxError` subclass and nothing else.

Retriable errors (no broker, timeouts, leader moves) become `KafkaUnavailable` (a
`ServiceUnavailable`); a rebalance during a commit becomes `CommitRefused`; anything else
Kafka refuses becomes `KafkaRequestError` with kafka-python's class name as `kind`.
No module of cdcbox outside `cdcbox.kafka` imports `kafka`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import kafka
from kafka import errors as kafka_errors
from kafka.structs import OffsetAndMetadata, TopicPartition

from cdcbox.errors import (
    EventsGone,
    ServiceUnavailable,
)
from cdcbox.kafka.admin import Admin
from cdcbox.kafka.base import Client, KafkaSettings, translated

__all__ = [
    "Admin",
    "Consumer",
    "KafkaSettings",
    "Producer",
    "SendFuture",
    "TopicPartition",
]


class _AssignmentListener(kafka.ConsumerRebalanceListener):  # type: ignore[misc]
    def __init__(self, on_assigned: Callable[[set[TopicPartition]], None]) -> None:
        self.on_assigned = on_assigned

    def on_partitions_revoked(self, revoked: Any) -> None:
        pass

    def on_partitions_assigned(self, assigned: Any) -> None:
        self.on_assigned(set(assigned))


class Consumer(Client):
    """A KafkaConsumer (auto-commit always off: cdcbox commits after its transactions).

    It reads only committed records (`isolation_level=read_committed`, unless `options`
    say otherwise): a transactional producer's aborted records (Kafka Connect's
    exactly-once source tasks, after a crash) stay in the log, and no consumer,
    dead-letter or replay tool of cdcbox may see them.

    With `strict_offsets`, `auto_offset_reset` applies only to a partition the group has
    no offset for; a committed offset that retention has since deleted raises
    `EventsGone` from `poll` instead of jumping silently to the oldest record left."""

    def __init__(
        self, settings: KafkaSettings, strict_offsets: bool = False, **options: Any
    ) -> None:
        self._start_at = options.get("auto_offset_reset", "latest")
        options = {"isolation_level": "read_committed", **options}
        if strict_offsets:
            options = {**options, "auto_offset_reset": "none"}
        super().__init__(
            settings,
            lambda: kafka.KafkaConsumer(**settings.options(), enable_auto_commit=False, **options),
            "consumer",
        )

    def subscribe(
        self,
        topics: list[str],
        on_assigned: Callable[[set[TopicPartition]], None] | None = None,
    ) -> None:
        """Subscribe; `on_assigned` runs before records of newly assigned partitions are
        returned, on kafka-python's IO thread (it logs and drops what the callback
        raises), possibly while the caller's thread is busy: it must not block, nor use
        what the caller's thread uses (a database session above all)."""
        listener = _AssignmentListener(on_assigned) if on_assigned else None
        self._call("subscribe", self._client.subscribe, topics=topics, listener=listener)
        # kafka-python records the partitions an assignment was computed from only when
        # metadata arrives after `subscribe`; a first join before that is computed from
        # nothing, and the next metadata response makes the member rejoin at once (a
        # second rebalance, taking back the first poll batch). One blocking refresh now.
        self._call("metadata refresh", self._client.topics)

    def poll(self, timeout_ms: int) -> dict[TopicPartition, list[Any]]:
        self._drop_parked_records()
        with translated("poll", self.settings):
            try:
                result: dict[TopicPartition, list[Any]] = self._client.poll(timeout_ms=timeout_ms)
            except kafka_errors.NoOffsetForPartitionError as e:
                # A partition this group never committed: where `auto_offset_reset` says.
                if self._start_at == "earliest":
                    self._client.seek_to_beginning(*e.args[0])
                else:
                    self._client.seek_to_end(*e.args[0])
                return {}
            except kafka_errors.OffsetOutOfRangeError as e:
                raise self._gone(e.args[0]) from e
        return result

    def await_partitions(self, topics: Iterable[str], timeout_s: float = 30) -> None:
        """Let this client's metadata see the (possibly just created) topics' partitions:
        a group assignment computed without them gives this member nothing to consume."""
        deadline = time.monotonic() + timeout_s
        for topic in topics:
            while not self.partitions_for_topic(topic):
                if time.monotonic() > deadline:
                    raise ServiceUnavailable(
                        f"topic {topic} shows no partitions after {timeout_s:.0f}s"
                    )
                time.sleep(0.1)

    def _drop_parked_records(self) -> None:
        """Work around kafka-python 3 (3.0.12, and its main branch as of 2026-12): the
        parsed records of a partition paused while they waited in line are parked, and
        given back only when no other partition's records are in line, but a drained
        batch stays in line for good; the resumed partition, in the fetcher's "pending
        data" set, is never fetched again. Records parked for a partition no longer
        paused (resumed, or revoked and assigned again) are dropped here: the partition's
        position did not move past them, so they are fetched again from there.
        (tests/e2e/test_kafka_pause.py fails without this.)"""
        fetcher = getattr(self._client, "_fetcher", None)
        parked = getattr(fetcher, "_paused_partition_records", None)
        if not parked:
            return
        subscription = self._client._subscription
        for tp in [tp for tp in parked if not subscription.is_paused(tp)]:
            parked.pop(tp).drain()

    def _gone(self, positions: Mapping[TopicPartition, int]) -> EventsGone:
        earliest = self.beginning_offsets(list(positions))
        parts = [
            f"{tp.topic}[{tp.partition}] at offset {offset}, oldest kept {earliest.get(tp)}"
            + (
                f" ({earliest[tp] - offset} records deleted unread)"
                if earliest.get(tp, offset) > offset
                else ""
            )
            for tp, offset in sorted(positions.items())
        ]
        return EventsGone(
            "the group's position is no longer on the topic (retention outran this "
            f"consumer): {'; '.join(parts)}. Nothing was skipped: reconcile those events "
            "from their source, then move the group on with `cdc-ctl groups reset`"
        )

    def commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit "resume at offset" per partition."""
        metadata = {tp: OffsetAndMetadata(o, "", -1) for tp, o in offsets.items()}
        self._call("offset commit", self._client.commit, metadata)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        self._call("seek", self._client.seek, tp, offset)

    def pause(self, partitions: set[TopicPartition]) -> None:
        if partitions:
            self._call("pause", self._client.pause, *partitions)

    def resume(self, partitions: set[TopicPartition]) -> None:
        if partitions:
            self._call("resume", self._client.resume, *partitions)

    def assign(self, partitions: list[TopicPartition]) -> None:
        self._call("assign", self._client.assign, partitions)

    def assignment(self) -> set[TopicPartition]:
        return set(self._call("assignment", self._client.assignment))

    def seek_to_beginning(self, *partitions: TopicPartition) -> None:
        self._call("seek", self._client.seek_to_beginning, *partitions)

    def position(self, tp: TopicPartition) -> int:
        return int(self._call("position", self._client.position, tp))

    def partitions_for_topic(self, topic: str) -> set[int]:
        return set(self._call("metadata", self._client.partitions_for_topic, topic) or ())

    def beginning_offsets(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        return dict(self._call("offsets", self._client.beginning_offsets, partitions))

    def end_offsets(self, partitions: list[TopicPartition]) -> dict[TopicPartition, int]:
        return dict(self._call("offsets", self._client.end_offsets, partitions))

    def offsets_for_times(
        self, times: Mapping[TopicPartition, int]
    ) -> dict[TopicPartition, int | None]:
        found = self._call("offsets", self._client.offsets_for_times, dict(times))
        return {tp: (o.offset if o is not None else None) for tp, o in found.items()}


class SendFuture:
    """The acknowledgement of one send; `get` waits for it (or raises a cdcbox error)."""

    def __init__(self, settings: KafkaSettings, future: Any) -> None:
        self._settings = settings
        self._future = future

    def get(self, timeout: float) -> None:
        with translated("send", self._settings):
            self._future.get(timeout=timeout)


class Producer(Client):
    """A KafkaProducer with acks=all; `send` raises at once for a record Kafka refuses
    before sending (e.g. over max.request.size), `SendFuture.get` for the rest."""

    def __init__(self, settings: KafkaSettings, **options: Any) -> None:
        super().__init__(
            settings,
            lambda: kafka.KafkaProducer(**settings.options(), acks="all", **options),
            "producer",
        )

    def send(
        self,
        topic: str,
        *,
        key: bytes | None,
        value: bytes | None,
        headers: list[tuple[str, bytes]],
        timestamp_ms: int | None = None,
    ) -> SendFuture:
        future = self._call(
            f"send to {topic}",
            self._client.send,
            topic,
            key=key,
            value=value,
            headers=headers,
            timestamp_ms=timestamp_ms,
        )
        return SendFuture(self.settings, future)

    def flush(self, timeout: float) -> None:
        self._call("flush", self._client.flush, timeout=timeout)
