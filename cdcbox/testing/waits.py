"""Waiting in tests: poll a condition with a deadline (never a bare sleep), wait for an
event to be applied by a handler, read what a topic holds."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg
from psycopg import sql

from cdcbox.kafka.client import Consumer, KafkaSettings, TopicPartition
from cdcbox.names import DbNames

T = TypeVar("T")


def eventually(
    probe: Callable[[], T | None],
    timeout: float = 60.0,
    interval: float = 0.1,
    what: str = "condition",
) -> T:
    """Poll `probe` until it returns a truthy value (returned, never None); fail with
    `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last is not None and last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


def wait_applied(
    dsn: str,
    consumer_name: str,
    event_id: uuid.UUID | str,
    *,
    names: DbNames = DbNames(),
    timeout: float = 60.0,
) -> str:
    """Wait until `consumer_name`'s inbox holds `event_id` as applied or skipped (the
    handler's transaction committed); returns that status."""
    query = sql.SQL(
        "SELECT status FROM {} WHERE event_id = %s AND consumer_name = %s "
        "AND status IN ('PROCESSED', 'SKIPPED')"
    ).format(names.table("inbox"))

    def status() -> str | None:
        with psycopg.connect(dsn) as conn:
            row = conn.execute(query, (str(event_id), consumer_name)).fetchone()
        return None if row is None else str(row[0])

    applied = eventually(status, timeout, what=f"{consumer_name} to apply event {event_id}")
    assert applied is not None
    return applied


def read_topic(
    kafka: KafkaSettings, topic: str, *, at_least: int = 1, timeout: float = 60.0
) -> list[Any]:
    """The records of `topic` from its beginning, once it holds `at_least` of them."""
    with Consumer(kafka, group_id=None) as reader:
        ids = eventually(lambda: reader.partitions_for_topic(topic), timeout, what=topic)
        partitions = [TopicPartition(topic, p) for p in sorted(ids)]
        reader.assign(partitions)
        reader.seek_to_beginning(*partitions)
        records: list[Any] = []

        def enough() -> bool:
            for batch in reader.poll(timeout_ms=200).values():
                records.extend(batch)
            return len(records) >= at_least

        eventually(enough, timeout, interval=0, what=f"{at_least} records on {topic}")
    return records
