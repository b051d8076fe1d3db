"""The OpenTelemetry SDK for tests: one global tracer provider for the test process
(OpenTelemetry allows one), whose spans are kept only while a test records them, in the
SDK's own in-memory exporter."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


class _WhileRecording(SpanProcessor):
    """Hands ended spans to the exporter only while a test records."""

    def __init__(self, exporter: InMemorySpanExporter) -> None:
        self.inner = SimpleSpanProcessor(exporter)
        self.recording = threading.Event()

    def on_end(self, span: ReadableSpan) -> None:
        if self.recording.is_set():
            self.inner.on_end(span)


_lock = threading.Lock()
_state: tuple[InMemorySpanExporter, _WhileRecording] | None = None


def _installed() -> tuple[InMemorySpanExporter, _WhileRecording]:
    global _state
    with _lock:
        if _state is None:
            exporter = InMemorySpanExporter()
            processor = _WhileRecording(exporter)
            provider = TracerProvider()
            provider.add_span_processor(processor)
            trace.set_tracer_provider(provider)
            _state = (exporter, processor)
        return _state


@contextmanager
def recorded_spans() -> Iterator[InMemorySpanExporter]:
    """Spans ended inside the block, from every thread of the process."""
    exporter, processor = _installed()
    exporter.clear()
    processor.recording.set()
    try:
        yield exporter
    finally:
        processor.recording.clear()


def tracer() -> trace.Tracer:
    _installed()
    return trace.get_tracer("tests")
