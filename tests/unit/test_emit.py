"""`Handler.emit`'s rules that need no database: what an emitted event carries from its
cause, and a clear refusal when no consumer bound the handler's outbox."""

from __future__ import annotations

import uuid

import pytest

from cdcbox.consumer import Handler, NewEvent
from cdcbox.consumer.emit import caused_by
from cdcbox.errors import UsageError
from cdcbox.event import decode
from tests.helpers import a_record

pytestmark = pytest.mark.unit

CAUSE_ID = uuid.uuid4()
TRACE = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
CAUSE = decode(
    a_record(
        headers=[
            ("id", str(CAUSE_ID).encode()),
            ("event_type", b"OrderCreated"),
            ("aggregate_type", b"order"),
            ("traceparent", TRACE.encode()),
        ]
    )
)


def test_an_emitted_event_names_its_cause_and_continues_its_trace() -> None:
    emitted = caused_by(CAUSE, NewEvent("stock", "o-1", "StockReserved", {}))
    assert (emitted.causation_id, emitted.trace_id) == (str(CAUSE_ID), TRACE)


def test_what_the_emitted_event_names_itself_is_kept() -> None:
    own = NewEvent("stock", "o-1", "StockReserved", {}, trace_id="mine", causation_id="c")
    assert caused_by(CAUSE, own) == own


def test_emit_outside_a_consumer_names_what_is_missing() -> None:
    class Loose(Handler):
        consumer_name = "loose"
        aggregate_types = ("order",)
        event_types = frozenset({"OrderCreated"})

    with pytest.raises(UsageError, match=r"Loose.emit\(\) outside a consumer"):
        Loose().emit(None, CAUSE, NewEvent("stock", "o-1", "StockReserved", {}))  # type: ignore[arg-type]


def test_an_emitted_event_stays_in_its_causes_trace_whatever_span_is_active() -> None:
    """A batch's span (a trace of its own, linked to its records') must not move the
    events a handler emits out of their cause's trace; a span of the cause's trace (the
    record's) becomes their parent."""
    from tests.otel import tracer

    with tracer().start_as_current_span("a batch") as batch:
        emitted = caused_by(CAUSE, NewEvent("stock", "o-1", "StockReserved", {}))
    assert emitted.trace_id == TRACE
    assert batch.get_span_context().trace_id != int(TRACE.split("-")[1], 16)


def test_the_cause_of_an_event_of_another_producer_is_its_id_as_written() -> None:
    foreign = decode(a_record(headers=[("id", b"order-7-created"), ("eventType", b"OrderCreated")]))
    emitted = caused_by(foreign, NewEvent("stock", "o-7", "StockReserved", {}))
    assert emitted.causation_id == "order-7-created"
