"""Reading what is on a topic, for tests that assert on the records themselves."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from kafka import KafkaConsumer

from cdcbox import wire
from cdcbox.stack.endpoints import Endpoints
from tests.helpers import eventually


def read_topic(
    stack: Endpoints,
    topic: str,
    expect: int,
    timeout: float = 60,
    settle_ms: int = 0,
    committed_only: bool = False,
) -> list[Any]:
    """At least `expect` records of `topic` from the beginning; with `settle_ms`, one more
    poll of that length, so a record beyond `expect` would show up too. `committed_only`:
    as a read_committed reader (cdcbox's consumers) sees them."""
    reader = KafkaConsumer(
        topic,
        bootstrap_servers=stack.bootstrap_servers,
        group_id=None,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        max_poll_records=5000,
        isolation_level="read_committed" if committed_only else "read_uncommitted",
    )
    got: list[Any] = []
    try:

        def more() -> bool:
            for records in reader.poll(timeout_ms=500).values():
                got.extend(records)
            return len(got) >= expect

        eventually(more, timeout=timeout, what=f"{expect} records on {topic}")
        if settle_ms:
            for records in reader.poll(timeout_ms=settle_ms).values():
                got.extend(records)
    finally:
        reader.close()
    return got


def assert_each_aggregate_in_order(
    stack: Endpoints, aggregate_type: str, total: int, aggregates: int, versions: int
) -> None:
    """The topic of `aggregate_type` holds `total` distinct events, and each of its
    `aggregates` has versions 1..`versions` in that order."""
    records = read_topic(stack, wire.topic_for(aggregate_type), expect=total, timeout=120)
    order: dict[bytes, list[int]] = defaultdict(list)
    for rec in sorted(records, key=lambda r: (r.partition, r.offset)):
        order[rec.key].append(int(dict(rec.headers)["aggregate_version"]))
    assert len({dict(r.headers)["id"] for r in records}) == total
    assert len(order) == aggregates
    for key, seen in order.items():
        assert seen == list(range(1, versions + 1)), f"{key!r} out of order"
