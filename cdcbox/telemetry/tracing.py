"""OpenTelemetry tracing when the API is installed (`cdcbox[otel]`); nothing otherwise.

Guarantee: with no OpenTelemetry installed, or with no SDK configured, every function
here does nothing observable and never raises. With an SDK (configured by your code or
by `opentelemetry-instrument`, no cdcbox-specific setup):

- a producer writes the active span's W3C `traceparent` into the outbox row when the
  event names no trace of its own, so the trace crosses the WAL with the event;
- the consumer runs each record's transaction inside a CONSUMER span (`process
  <topic>`) continuing that trace, with the messaging semantic conventions' attributes;
  retries are span events, a dead-lettered record sets the span's status to ERROR; a
  batch is one span linked to each record's trace; a handler's own spans (psycopg's
  instrumentation, say) nest under it, and the events it emits continue it;
- the polling relay sends each row inside a PRODUCER span (`send <topic>`).
"""

from __future__ import annotations

from collections.abc import Coroutine, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from typing import Any, TypeVar

try:
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.trace import Link, Span, SpanKind, StatusCode
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    _PROPAGATOR: TraceContextTextMapPropagator | None = TraceContextTextMapPropagator()
except ImportError:  # the `otel` extra is not installed
    _PROPAGATOR = None

T = TypeVar("T")
SYSTEM = "kafka"


def _configured() -> bool:
    """An SDK (or any real provider) is set: until then spans would all be no-ops, and
    making them costs the consumer ~20 µs a record for nothing."""
    if _PROPAGATOR is None:
        return False
    provider = trace.get_tracer_provider()
    return not isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)


# True inside `batch_span` (see `continuing`).
_IN_BATCH: ContextVar[bool] = ContextVar("cdcbox_in_batch_span", default=False)


def current_traceparent() -> str | None:
    """The active span's W3C traceparent, None without one (or without OpenTelemetry)."""
    if _PROPAGATOR is None:
        return None
    carrier: dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return carrier.get("traceparent")


def continuing(traceparent: str | None) -> str | None:
    """The traceparent an event caused by one carrying `traceparent` should carry: the
    active span's when it belongs to that trace (a child, as the consumer's span of the
    record is), else `traceparent` itself — a batch's span, linked to many traces, must
    not move an event out of its own trace."""
    current = current_traceparent()
    if traceparent is None:
        # Under a batch's span the cause's records share one span; their untraced
        # chains must not become its one trace: the event names none ("").
        return "" if _IN_BATCH.get() else current
    if current is not None and _trace_id(current) == _trace_id(traceparent):
        return current
    return traceparent


def _trace_id(traceparent: str) -> str:
    parts = traceparent.split("-")
    return parts[1] if len(parts) > 2 else traceparent


def _remote_context(traceparent: str | None) -> Any:
    """The context a traceparent header continues (None: start a new trace)."""
    if _PROPAGATOR is None or not traceparent:
        return None
    return _PROPAGATOR.extract({"traceparent": traceparent})


def _tracer() -> Any:
    return trace.get_tracer("cdcbox")


class RecordSpan:
    """What the consumer tells the span of one record: how it ended."""

    def __init__(self, span: Any) -> None:
        self.span = span

    def ended(self, outcome: str) -> None:
        if self.span is not None:
            self.span.set_attribute("cdcbox.outcome", outcome)


_NO_SPAN = nullcontext(RecordSpan(None))  # reusable: nullcontext holds no state


def consumer_span(
    *,
    topic: str,
    partition: int,
    offset: int,
    event_id: str,
    key: str,
    group: str,
    consumer: str,
    traceparent: str | None,
) -> AbstractContextManager[RecordSpan]:
    """The CONSUMER span of one record's processing, current while it runs."""
    if not _configured():
        return _NO_SPAN
    attributes = {
        "messaging.system": SYSTEM,
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.destination.name": topic,
        "messaging.destination.partition.id": str(partition),
        "messaging.kafka.offset": offset,
        "messaging.kafka.message.key": key,
        "messaging.message.id": event_id,
        "messaging.consumer.group.name": group,
        "cdcbox.consumer": consumer,
    }
    return _record_span(f"process {topic}", traceparent, attributes)


@contextmanager
def _record_span(
    name: str, traceparent: str | None, attributes: dict[str, Any]
) -> Iterator[RecordSpan]:
    with _tracer().start_as_current_span(
        name, context=_remote_context(traceparent), kind=SpanKind.CONSUMER, attributes=attributes
    ) as span:
        yield RecordSpan(span)


@contextmanager
def batch_span(
    *, topics: Sequence[str], group: str, traceparents: Sequence[str | None]
) -> Iterator[None]:
    """One CONSUMER span for a batch applied in one transaction, linked to the trace of
    each record that carries one (the conventions' batch processing)."""
    if not _configured():
        yield None
        return
    links = []
    for traceparent in traceparents:
        context = _remote_context(traceparent)
        span_context = trace.get_current_span(context).get_span_context() if context else None
        if span_context is not None and span_context.is_valid:
            links.append(Link(span_context))
    destination = topics[0] if len(set(topics)) == 1 else "(several topics)"
    attributes = {
        "messaging.system": SYSTEM,
        "messaging.operation.type": "process",
        "messaging.operation.name": "process",
        "messaging.destination.name": destination,
        "messaging.batch.message_count": len(traceparents),
        "messaging.consumer.group.name": group,
    }
    in_batch = _IN_BATCH.set(True)
    try:
        with _tracer().start_as_current_span(
            f"process {destination}", kind=SpanKind.CONSUMER, links=links, attributes=attributes
        ):
            yield None
    finally:
        _IN_BATCH.reset(in_batch)


def producer_span(*, topic: str, key: str, event_id: str, traceparent: str | None) -> Any:
    """The polling relay's PRODUCER span around one send (a context manager)."""
    if not _configured():
        return nullcontext()
    return _tracer().start_as_current_span(
        f"send {topic}",
        context=_remote_context(traceparent),
        kind=SpanKind.PRODUCER,
        attributes={
            "messaging.system": SYSTEM,
            "messaging.operation.type": "send",
            "messaging.operation.name": "send",
            "messaging.destination.name": topic,
            "messaging.kafka.message.key": key,
            "messaging.message.id": event_id,
        },
    )


def _recording() -> Span | None:
    if _PROPAGATOR is None:
        return None
    span = trace.get_current_span()
    return span if span.is_recording() else None


def retried(attempt: int, error: BaseException) -> None:
    """A failed attempt that will be retried: an event on the record's span."""
    if (span := _recording()) is not None:
        span.add_event(
            "retry",
            {
                "cdcbox.attempt": attempt,
                "exception.type": type(error).__name__,
                "exception.message": str(error)[:500],
            },
        )


def dead_lettered(error: BaseException) -> None:
    """The record went to its dead-letter topic: an event, and the span's status ERROR."""
    if (span := _recording()) is not None:
        span.add_event("dead_lettered", {"exception.type": type(error).__name__})
        span.set_status(StatusCode.ERROR, f"dead-lettered: {type(error).__name__}: {error}"[:500])


def in_current_context(coroutine: Coroutine[Any, Any, T]) -> Coroutine[Any, Any, T]:
    """`coroutine`, run within the calling thread's OpenTelemetry context wherever it is
    awaited (an async handler runs on the handlers' own loop, in another thread)."""
    if _PROPAGATOR is None:
        return coroutine
    captured = otel_context.get_current()

    async def attached() -> T:
        token = otel_context.attach(captured)
        try:
            return await coroutine
        finally:
            otel_context.detach(token)

    return attached()
