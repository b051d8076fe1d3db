"""OpenTelemetry through the consumer's real pipeline on real PostgreSQL (the harness),
with the SDK's in-memory exporter: the producer's span travels in the outbox row, the
consumer's CONSUMER span continues it with the messaging conventions' attributes,
retries and dead letters show on it, a handler's spans and emitted events nest under it
(sync and async), and a batch is one span linked to each record's trace."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from opentelemetry import trace
from opentelemetry.trace import SpanKind, StatusCode

from cdcbox.consumer import AsyncHandler, Event, Handler, NewEvent, Outcome
from cdcbox.event import decode
from cdcbox.producer.outbox import event_row
from cdcbox.telemetry.tracing import current_traceparent
from cdcbox.testing import Harness
from tests.helpers import unique
from tests.otel import recorded_spans, tracer

pytestmark = pytest.mark.integration


def traceparent_of(span: Any) -> str:
    context = span.get_span_context()
    return f"00-{context.trace_id:032x}-{context.span_id:016x}-{int(context.trace_flags):02x}"


def test_the_active_span_travels_in_the_outbox_row_unless_the_event_names_a_trace() -> None:
    assert current_traceparent() is None  # no span: nothing is written
    with tracer().start_as_current_span("place order") as span:
        row = event_row(NewEvent("order", "o1", "OrderCreated", {}))
        own = event_row(NewEvent("order", "o1", "OrderCreated", {}, trace_id="00-mine"))
    assert row.trace_id == traceparent_of(span)
    assert own.trace_id == "00-mine"


class Stock(Handler):
    event_types = frozenset({"OrderCreated"})
    failures = 0

    def handle(self, event: Event, conn: psycopg.Connection[Any]) -> None:
        with tracer().start_as_current_span("reserve stock"):
            conn.execute("SELECT 1")
        if event.payload.get("fail_times", 0) > self.failures:
            self.failures += 1
            raise ConnectionError("stock service busy")
        self.emit(
            conn,
            event,
            NewEvent(event.aggregate_type + "-stock", event.aggregate_id, "StockReserved", {}),
        )


class AsyncStock(AsyncHandler):
    event_types = frozenset({"OrderCreated"})

    async def handle(self, event: Event, conn: psycopg.AsyncConnection[Any]) -> None:
        with tracer().start_as_current_span("reserve stock"):
            await conn.execute("SELECT 1")
        await self.emit(
            conn,
            event,
            NewEvent(event.aggregate_type + "-stock", event.aggregate_id, "StockReserved", {}),
        )


def stock_handler(base: type[Handler], aggregate_type: str) -> Handler:
    """A `base` handler of its own consumer name, on `aggregate_type`."""
    attributes = {"consumer_name": unique("stock"), "aggregate_types": (aggregate_type,)}
    handler: Handler = type("StockHandler", (base,), attributes)()
    return handler


@pytest.mark.parametrize("base", [Stock, AsyncStock], ids=["sync", "async"])
def test_the_consumer_continues_the_producers_trace(
    cdcbox_harness: Callable[..., Harness], cdcbox_aggregate_type: str, base: type[Handler]
) -> None:
    handler = stock_handler(base, cdcbox_aggregate_type)
    harness = cdcbox_harness([handler])
    with recorded_spans() as spans:
        with tracer().start_as_current_span("place order") as producer:
            record = harness.record(NewEvent(cdcbox_aggregate_type, "o1", "OrderCreated", {}))
        assert harness.send(record) == Counter({Outcome.PROCESSED: 1})
    by_name = {s.name: s for s in spans.get_finished_spans()}
    process = by_name[f"process outbox.event.{cdcbox_aggregate_type}"]
    trace_id = producer.get_span_context().trace_id
    assert process.kind is SpanKind.CONSUMER
    assert process.context.trace_id == trace_id
    assert (
        process.parent is not None and process.parent.span_id == producer.get_span_context().span_id
    )
    attributes = dict(process.attributes or {})
    assert attributes["messaging.system"] == "kafka"
    assert attributes["messaging.operation.type"] == "process"
    assert attributes["messaging.destination.name"] == record.topic
    assert attributes["messaging.destination.partition.id"] == "0"
    assert attributes["messaging.kafka.offset"] == record.offset
    assert attributes["messaging.message.id"] == str(decode(record).event_id)
    assert attributes["messaging.consumer.group.name"] == harness.config.group_id
    assert attributes["cdcbox.outcome"] == "processed"
    # The handler's own span nests under the record's, on the async loop's thread too.
    inner = by_name["reserve stock"]
    assert inner.parent is not None and inner.parent.span_id == process.context.span_id
    # What the handler emitted continues the trace as a child of the record's span.
    (emitted,) = [decode(r) for r in harness.emitted()]
    assert emitted.trace_id == traceparent_of(process)


def test_retries_are_events_and_a_dead_letter_is_an_error(
    cdcbox_harness: Callable[..., Harness], cdcbox_aggregate_type: str
) -> None:
    handler = stock_handler(Stock, cdcbox_aggregate_type)
    harness = cdcbox_harness([handler])  # two attempts
    with recorded_spans() as spans:
        retried = harness.record(
            NewEvent(cdcbox_aggregate_type, "o1", "OrderCreated", {"fail_times": 1})
        )
        doomed = harness.record(
            NewEvent(cdcbox_aggregate_type, "o2", "OrderCreated", {"fail_times": 9})
        )
        assert harness.send(retried, doomed) == Counter(
            {Outcome.PROCESSED: 1, Outcome.DEAD_LETTERED: 1}
        )
    first, second = [s for s in spans.get_finished_spans() if s.name.startswith("process ")]
    assert [e.name for e in first.events] == ["retry"]
    assert first.status.status_code is StatusCode.UNSET
    assert [e.name for e in second.events] == ["retry", "dead_lettered"]
    assert second.status.status_code is StatusCode.ERROR
    assert dict(second.attributes or {})["cdcbox.outcome"] == "dead_lettered"


def test_a_batch_is_one_span_linked_to_each_records_trace(
    cdcbox_harness: Callable[..., Harness], cdcbox_aggregate_type: str
) -> None:
    handler = stock_handler(Stock, cdcbox_aggregate_type)
    harness = cdcbox_harness([handler], batch_mode=True)
    with recorded_spans() as spans:
        producers, records = [], []
        for key in ("o1", "o2", "o3"):
            with tracer().start_as_current_span(f"place {key}") as producer:
                producers.append(producer.get_span_context())
                records.append(
                    harness.record(NewEvent(cdcbox_aggregate_type, key, "OrderCreated", {}))
                )
        assert harness.send(*records) == Counter({Outcome.PROCESSED: 3})
    (batch,) = [s for s in spans.get_finished_spans() if s.name.startswith("process ")]
    assert dict(batch.attributes or {})["messaging.batch.message_count"] == 3
    assert [link.context.span_id for link in batch.links] == [p.span_id for p in producers]
    assert batch.kind is SpanKind.CONSUMER


def test_no_span_no_trace(
    cdcbox_harness: Callable[..., Harness], cdcbox_aggregate_type: str
) -> None:
    """Without an active span nothing is invented: the row's trace stays empty."""
    assert trace.get_current_span().get_span_context().is_valid is False
    assert event_row(NewEvent(cdcbox_aggregate_type, "o1", "OrderCreated", {})).trace_id == ""


def test_in_a_batch_events_of_untraced_causes_do_not_join_the_batchs_trace(
    cdcbox_harness: Callable[..., Harness], cdcbox_aggregate_type: str
) -> None:
    """Audit 33, case 16: records that carry no trace, handled in one batch, each emit an
    event. The old code gave every emitted event the batch span's trace: unrelated
    chains became one trace."""
    handler = stock_handler(Stock, cdcbox_aggregate_type)
    harness = cdcbox_harness([handler], batch_mode=True)
    records = [
        harness.record(NewEvent(cdcbox_aggregate_type, key, "OrderCreated", {}))
        for key in ("o1", "o2")
    ]  # no active span: no trace
    with recorded_spans() as spans:
        assert harness.send(*records) == Counter({Outcome.PROCESSED: 2})
    (batch,) = [s for s in spans.get_finished_spans() if s.name.startswith("process ")]
    emitted = [decode(r).trace_id for r in harness.emitted()]
    assert len(emitted) == 2
    batch_trace = f"{batch.context.trace_id:032x}"
    assert not any(t and batch_trace in t for t in emitted), emitted
