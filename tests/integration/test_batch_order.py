"""Batch mode applies what per-record mode applies, in the same order (audit 33, cases 6
and 7): a handler never gets an event type it does not take, and one aggregate's events
reach their handlers in record order across consumers, versioned or not."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from cdcbox.consumer import Event, Handler
from cdcbox.names import DbNames
from cdcbox.producer import NewEvent
from cdcbox.testing import Harness
from tests.helpers import unique

pytestmark = pytest.mark.integration


def handler_of(consumer: str, aggregate: str, types: set[str], seen: list[Any]) -> Handler:
    class Recording(Handler):
        consumer_name = consumer
        aggregate_types = (aggregate,)
        event_types = frozenset(types)

        def handle(self, event: Event, conn: psycopg.Connection[Any]) -> None:
            seen.append((consumer, event.event_type, event.payload["n"]))

    return Recording()


def test_a_type_the_consumer_does_not_take_never_reaches_its_handler_in_a_batch(
    database: str, cdcbox_schema: DbNames
) -> None:
    """Case 6: with the parked cache distrusted (after an assignment), an event of a type
    consumer X does not take goes the handled way to a stand-in that skips it. The old
    code grouped the batch by consumer name and gave it to X's real handler."""
    aggregate = unique("Order")
    seen: list[Any] = []
    handler = handler_of(unique("x"), aggregate, {"Placed"}, seen)
    with Harness(database, [handler], names=cdcbox_schema, batch_mode=True) as harness:
        harness.pipeline.park_gate.stores.parking.invalidate()  # as after an assignment
        harness.send(
            NewEvent(aggregate, "o1", "Placed", {"n": 1}, 1),
            NewEvent(aggregate, "o1", "Noted", {"n": 2}, 2),
            NewEvent(aggregate, "o1", "Placed", {"n": 3}, 3),
        )
    assert seen == [(handler.consumer_name, "Placed", 1), (handler.consumer_name, "Placed", 3)]


@pytest.mark.parametrize("versioned", [False, True], ids=["unversioned", "versioned"])
def test_one_aggregates_events_reach_their_handlers_in_record_order(
    database: str, cdcbox_schema: DbNames, versioned: bool
) -> None:
    """Case 7: consumers X (type A) and Y (type B) share a table; the old code called X's
    handler with the batch's A events, then Y's with the B events: 1, 3, 2."""
    aggregate = unique("Order")
    seen: list[Any] = []
    x = handler_of(unique("x"), aggregate, {"A"}, seen)
    y = handler_of(unique("y"), aggregate, {"B"}, seen)
    events = [
        NewEvent(aggregate, "o1", t, {"n": n}, n if versioned else None)
        for n, t in enumerate(["A", "B", "A", "B"], start=1)
    ]
    with Harness(database, [x, y], names=cdcbox_schema, batch_mode=True) as harness:
        harness.send(*events)
    assert [n for _, _, n in seen] == [1, 2, 3, 4]
