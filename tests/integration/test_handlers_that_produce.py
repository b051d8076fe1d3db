"""A handler that produces (`Handler.emit`): its events are appended to the consumer's
own outbox on the record's own connection, commit with the record's effect or not at
all, are emitted once however often the record is redelivered, and carry the consumed
event's trace id and its event id as causation id — sync and async, per record, batch
and pipelined."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from cdcbox import wire
from cdcbox.consumer import AsyncHandler, Event, Handler, NewEvent, Outcome
from cdcbox.event import decode
from cdcbox.testing import Harness
from tests.helpers import unique

pytestmark = pytest.mark.integration

TRACE = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def trace_of(traceparent: str | None) -> str:
    """The trace id of a W3C traceparent (what must carry over; the span id may not)."""
    return (traceparent or "").split("-")[1]


def reservation(cause: Event) -> NewEvent:
    """What the stock service answers to an order; an order asking for it to fail fails
    after the answer was emitted (the emission must roll back with it)."""
    return NewEvent(
        cause.aggregate_type + "-stock",
        cause.aggregate_id,
        "StockReserved",
        {"order": cause.aggregate_id},
        aggregate_version=cause.aggregate_version,
    )


class Stock(Handler):
    event_types = frozenset({"OrderCreated"})

    def handle(self, event: Event, conn: psycopg.Connection[Any]) -> None:
        self.emit(conn, event, reservation(event))
        if event.payload.get("fail"):
            raise ValueError("out of stock")


class AsyncStock(AsyncHandler):
    event_types = frozenset({"OrderCreated"})

    async def handle(self, event: Event, conn: psycopg.AsyncConnection[Any]) -> None:
        await self.emit(conn, event, reservation(event))
        if event.payload.get("fail"):
            raise ValueError("out of stock")


MODES = {
    "per-record": (Stock, {}, False),
    "batch": (Stock, {}, True),
    "pipelined": (Stock, {"pipelined": True}, False),
    "async": (AsyncStock, {}, False),
    "async-batch": (AsyncStock, {}, True),
}


@pytest.mark.parametrize("mode", MODES)
def test_emitted_events_commit_with_the_effect_once_and_name_their_cause(
    cdcbox_harness: Callable[..., Harness], cdcbox_aggregate_type: str, mode: str
) -> None:
    base, attributes, batch_mode = MODES[mode]
    handler_class = type(
        "StockHandler",
        (base,),
        {
            "consumer_name": unique("stock"),
            "aggregate_types": (cdcbox_aggregate_type,),
            **attributes,
        },
    )
    harness = cdcbox_harness([handler_class()], batch_mode=batch_mode)
    order = lambda key, **p: harness.record(  # noqa: E731
        NewEvent(cdcbox_aggregate_type, key, "OrderCreated", p, aggregate_version=1, trace_id=TRACE)
    )
    first, failing, third = order("o-1"), order("o-2", fail=True), order("o-3")
    assert harness.send(first, failing, third, first) == Counter(
        {Outcome.PROCESSED: 2, Outcome.DEAD_LETTERED: 1, Outcome.DUPLICATE: 1}
    )
    assert harness.send(first, third) == Counter({Outcome.DUPLICATE: 2})

    emitted = [decode(record) for record in harness.emitted()]
    # Once each, for the applied orders only: the failed one's answer rolled back with it.
    assert [(e.aggregate_id, e.event_type) for e in emitted] == [
        ("o-1", "StockReserved"),
        ("o-3", "StockReserved"),
    ]
    causes = {decode(first).event_id, decode(third).event_id}
    assert {e.causation_id for e in emitted} == {str(c) for c in causes}
    # The consumed event's trace (with an OpenTelemetry SDK set up by another test of the
    # process, a child span of the record's: the same trace id).
    assert {trace_of(e.trace_id) for e in emitted} == {trace_of(TRACE)}
    assert emitted[0].topic == wire.topic_for(cdcbox_aggregate_type + "-stock")


def test_a_chain_of_services_is_followed_by_causation_ids(
    cdcbox_harness: Callable[..., Harness], cdcbox_aggregate_type: str
) -> None:
    """order → stock → order: the second hop's events name the first hop's as cause,
    and an event's own trace id is kept when it names one."""
    own_trace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

    class Confirm(Handler):
        consumer_name = unique("orders")
        aggregate_types = (cdcbox_aggregate_type + "-stock",)
        event_types = frozenset({"StockReserved"})

        def handle(self, event: Event, conn: psycopg.Connection[Any]) -> None:
            self.emit(
                conn,
                event,
                NewEvent(cdcbox_aggregate_type, event.aggregate_id, "OrderConfirmed", {}),
            )
            self.emit(
                conn,
                event,
                NewEvent("audit", event.aggregate_id, "Noted", {}, trace_id=own_trace),
            )

    stock = type(
        "S",
        (Stock,),
        {"consumer_name": unique("stock"), "aggregate_types": (cdcbox_aggregate_type,)},
    )
    first_hop = cdcbox_harness([stock()])
    order = first_hop.record(
        NewEvent(cdcbox_aggregate_type, "o-9", "OrderCreated", {}, trace_id=TRACE)
    )
    first_hop.send(order)
    (reserved,) = first_hop.emitted()
    second_hop = cdcbox_harness([Confirm()])
    assert second_hop.send(reserved) == Counter({Outcome.PROCESSED: 1})
    confirmed, noted = (decode(r) for r in second_hop.emitted()[-2:])
    assert confirmed.causation_id == str(decode(reserved).event_id)
    assert decode(reserved).causation_id == str(decode(order).event_id)
    assert (trace_of(confirmed.trace_id), noted.trace_id) == (trace_of(TRACE), own_trace)
    assert f"caused by {decode(reserved).event_id}" in confirmed.log_fields
