"""One OpenTelemetry trace across the whole pipeline: a producer's span, the outbox row,
the WAL, Debezium, Kafka, the consumer's CONSUMER span, the event its handler emits, the
WAL again and the second hop's span — with the SDK's in-memory exporter, and with the
standard tooling (`opentelemetry-instrument --traces_exporter console cdc-ctl consume`)
and no cdcbox-specific setup."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path
from typing import Any

import psycopg
import pytest

from cdcbox.consumer import Event, Handler, NewEvent
from cdcbox.producer.outbox import Outbox
from cdcbox.stack.endpoints import Endpoints
from tests.e2e.conftest import INSERT_EFFECT, count_effects, effect_row
from tests.helpers import eventually, unique
from tests.otel import recorded_spans, tracer

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]


def test_one_trace_from_a_producer_span_through_the_wal_to_a_second_hop(
    stack: Endpoints, run_consumer: Any
) -> None:
    orders, answers = unique("order"), unique("stock")
    first, second = unique("inventory"), unique("orders")

    class Inventory(Handler):
        consumer_name = first
        aggregate_types = (orders,)
        event_types = frozenset({"OrderCreated"})

        def handle(self, event: Event, conn: psycopg.Connection[Any]) -> None:
            self.emit(conn, event, NewEvent(answers, event.aggregate_id, "StockReserved", {}))

    class Orders(Handler):
        consumer_name = second
        aggregate_types = (answers,)
        event_types = frozenset({"StockReserved"})

        def handle(self, event: Event, conn: psycopg.Connection[Any]) -> None:
            conn.execute(INSERT_EFFECT, effect_row(second, event))

    with recorded_spans() as spans:
        with (
            tracer().start_as_current_span("place order") as producer,
            psycopg.connect(stack.dsn) as conn,
            conn.transaction(),
        ):
            Outbox().append(conn, NewEvent(orders, "o-1", "OrderCreated", {}))
        with run_consumer([Inventory()], group=first), run_consumer([Orders()], group=second):
            eventually(lambda: count_effects(stack.dsn, second) == 1, what="the second hop")

            def processed() -> list[Any]:
                found = [s for s in spans.get_finished_spans() if s.name.startswith("process ")]
                return found if len(found) >= 2 else []

            hops = {s.name: s for s in eventually(processed, what="both hops' spans")}
    hop1, hop2 = hops[f"process outbox.event.{orders}"], hops[f"process outbox.event.{answers}"]
    context = producer.get_span_context()
    assert hop1.context.trace_id == hop2.context.trace_id == context.trace_id
    assert hop1.parent is not None and hop1.parent.span_id == context.span_id
    assert hop2.parent is not None and hop2.parent.span_id == hop1.context.span_id


def test_opentelemetry_instrument_prints_the_consumers_spans_in_the_producers_trace(
    stack: Endpoints, tmp_path: Path
) -> None:
    aggregate, consumer = unique("ledger"), unique("otel")
    with (
        tracer().start_as_current_span("place order") as producer,
        psycopg.connect(stack.dsn) as conn,
        conn.transaction(),
    ):
        Outbox().append(conn, NewEvent(aggregate, "a-1", "Changed", {"n": 1}))
    env = {
        **os.environ,
        **stack.as_env(),
        "FAULT_CONSUMER": consumer,
        "FAULT_AGGREGATE_TYPE": aggregate,
        "OTEL_SERVICE_NAME": "inventory",
    }
    argv = [
        "opentelemetry-instrument", "--traces_exporter", "console",
        "--metrics_exporter", "none", "--logs_exporter", "none",
        "cdc-ctl", "consume", "tests.faults.handlers:EffectHandler", "--group", consumer,
    ]  # fmt: skip
    stdout, stderr = tmp_path / "spans.json", tmp_path / "consume.log"
    with stdout.open("wb") as out, stderr.open("wb") as err:
        process = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=err)
        try:
            eventually(lambda: count_effects(stack.dsn, consumer) == 1, what="the event applied")
        finally:
            process.send_signal(signal.SIGTERM)  # finishes, exits 0, the SDK flushes
            assert process.wait(timeout=60) == 0, stderr.read_text()[-2000:]
    spans = console_spans(stdout.read_text())
    (process_span,) = [s for s in spans if s["name"] == f"process outbox.event.{aggregate}"]
    context = producer.get_span_context()
    assert process_span["kind"] == "SpanKind.CONSUMER"
    assert process_span["context"]["trace_id"] == f"0x{context.trace_id:032x}"
    assert process_span["parent_id"] == f"0x{context.span_id:016x}"
    assert process_span["attributes"]["messaging.consumer.group.name"] == consumer
    assert process_span["resource"]["attributes"]["service.name"] == "inventory"


def console_spans(text: str) -> list[dict[str, Any]]:
    """The spans the SDK's console exporter printed: JSON objects one after another."""
    decoder, spans, at = json.JSONDecoder(), [], 0
    while (start := text.find("{", at)) != -1:
        span, at = decoder.raw_decode(text, start)
        spans.append(span)
    return spans
