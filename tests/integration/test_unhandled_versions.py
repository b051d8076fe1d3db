"""Versions of events a consumer has no handler for (audit 26, cases 1 and 8): they advance
the consumer's version so `hold` never waits for them, but never past a parked event, and
never ahead of an earlier event of the same poll batch. Real PostgreSQL, the consumer's
real pipeline (the harness); Kafka's part is the harness's memory topics."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from cdcbox.consumer import Event, Handler, Outcome
from cdcbox.kafka import dlq
from cdcbox.names import DbNames
from cdcbox.producer import NewEvent
from cdcbox.testing import Harness
from cdcbox.testing.harness import Record
from tests.helpers import parked_count, unique

pytestmark = pytest.mark.integration


def handler_of(consumer: str, aggregate: str, event_types: set[str], fail_on: set[int]) -> Any:
    class Recording(Handler):
        consumer_name = consumer
        aggregate_types = (aggregate,)

        def __init__(self) -> None:
            self.applied: list[int | None] = []
            self.failing = set(fail_on)

        def handle(self, event: Event, conn: psycopg.Connection[Any]) -> None:
            if event.aggregate_version in self.failing:
                raise RuntimeError(f"handler bug at v{event.aggregate_version}")
            self.applied.append(event.aggregate_version)

    Recording.event_types = frozenset(event_types)
    return Recording()


def replay(
    harness: Harness, topic: str, names: DbNames, conn: psycopg.Connection[Any]
) -> list[Any]:
    """What `cdc-ctl dlq replay` does, with the harness's memory topics as Kafka."""
    letters = [
        dlq.DeadLetter(r.partition, r.offset, r.key, r.value, [(k, v or b"") for k, v in r.headers])
        for r in harness.dead_letters(topic)
    ]
    before = len(harness.topics.records[topic]) if topic in harness.topics.records else 0
    with conn.transaction():
        dlq.replay_with(harness.topics, letters, parked_in=conn, names=names)
    return harness.topics.records[topic][before:]


def as_records(copies: list[Any]) -> list[Record]:
    return [Record(c.topic, 0, 1000 + i, c.key, c.value, c.headers) for i, c in enumerate(copies)]


def test_an_unhandled_event_does_not_move_a_parked_aggregate_past_its_dead_letter(
    database: str, cdcbox_schema: DbNames, db: psycopg.Connection[Any]
) -> None:
    aggregate, order = unique("Order"), unique("o")
    handler = handler_of(unique("c"), aggregate, {"Placed"}, fail_on={1})
    with Harness(database, [handler], names=cdcbox_schema) as harness:
        harness.send(
            NewEvent(aggregate, order, "Placed", {}, 1),
            NewEvent(aggregate, order, "Noted", {}, 2),  # no handler takes it
            NewEvent(aggregate, order, "Placed", {}, 3),
        )
        assert handler.applied == []
        handler.failing.clear()  # the bug is fixed; the operator replays
        topic = harness.record(NewEvent(aggregate, order, "Placed", {}, 9)).topic
        harness.send(*as_records(replay(harness, topic, cdcbox_schema, db)))
        assert handler.applied == [1, 3]
        assert parked_count(db, cdcbox_schema, handler.consumer_name) == 0


@pytest.mark.parametrize("batch_mode", [False, True], ids=["per-record", "batch"])
def test_a_consumer_without_a_handler_for_a_type_sees_no_false_gap(
    database: str, cdcbox_schema: DbNames, batch_mode: bool
) -> None:
    aggregate, order = unique("Order"), unique("o")
    placed = handler_of(unique("c"), aggregate, {"Placed", "Shipped"}, fail_on=set())
    paid = handler_of(unique("c"), aggregate, {"Paid"}, fail_on=set())
    with Harness(
        database, [placed, paid], names=cdcbox_schema, batch_mode=batch_mode, gap_policy="hold"
    ) as harness:
        ended = harness.send(
            NewEvent(aggregate, order, "Placed", {}, 1),
            NewEvent(aggregate, order, "Paid", {}, 2),
            NewEvent(aggregate, order, "Shipped", {}, 3),
        )
    assert placed.applied == [1, 3]
    assert paid.applied == [2]
    assert ended[Outcome.DEAD_LETTERED] == 0


def test_an_unhandled_event_in_a_batch_does_not_make_an_earlier_one_stale(
    database: str, cdcbox_schema: DbNames
) -> None:
    aggregate, order = unique("Order"), unique("o")
    handler = handler_of(unique("c"), aggregate, {"Placed", "Shipped"}, fail_on=set())
    with Harness(database, [handler], names=cdcbox_schema, batch_mode=True) as harness:
        ended = harness.send(
            NewEvent(aggregate, order, "Placed", {}, 1),
            NewEvent(aggregate, order, "Noted", {}, 2),  # no handler takes it
            NewEvent(aggregate, order, "Shipped", {}, 3),
        )
    assert handler.applied == [1, 3]
    assert ended[Outcome.STALE] == 0
