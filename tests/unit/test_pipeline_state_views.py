"""The two views of a `PipelineState`: the exporter's metric families and `cdc-ctl top`'s
frame (pure functions of readings; the readings themselves are read from the real
stack in tests/e2e/test_metrics.py and test_top.py)."""

from __future__ import annotations

import dataclasses
import io

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import Metric
from prometheus_client.registry import Collector
from rich.console import Console

from cdcbox.kafka.client import KafkaSettings
from cdcbox.observe.exporter import metrics_of
from cdcbox.observe.pipeline_state import (
    ConnectorState,
    InboxCount,
    InboxSize,
    OutboxState,
    ParkedCount,
    PartitionLag,
    PipelineState,
    ServiceDb,
    Sources,
)
from cdcbox.observe.top_view import MAX_LAG_ROWS, SlotClock, frame
from cdcbox.observe.transaction_state import TransactionState
from cdcbox.ops.slots import SlotStatus
from tests.helpers import FakeTime

SLOT = SlotStatus(
    "cdcbox_outbox", "pgoutput", "logical", True, "0/1", "0/1", 2_097_152, "reserved", "shop"
)


def state(taken_at: float, last_id: int, processed: int, **overrides: object) -> PipelineState:
    values: dict[str, object] = {
        "outboxes": [OutboxState(last_id)],
        "slots": [SLOT],
        "inbox": [
            InboxCount("inventory", "PROCESSED", processed),
            InboxCount("inventory", "FAILED", 1),
        ],
        "connectors": [ConnectorState("cdcbox-outbox", "RUNNING", ("RUNNING", "FAILED"))],
        "parked": [ParkedCount("inventory", 2)],
        "inbox_sizes": [InboxSize(1_000_000)],
        "lags": [PartitionLag("inventory-service", "outbox.event.order", 0, 7)],
    }
    values.update(overrides)
    return PipelineState(taken_at, **values)  # type: ignore[arg-type]


def exposition(families: list[Metric]) -> str:
    class Fixed(Collector):
        def collect(self) -> list[Metric]:
            return families

    registry = CollectorRegistry()
    registry.register(Fixed())
    return generate_latest(registry).decode()


def test_the_exporter_serves_each_reading_and_marks_an_unread_source_down() -> None:
    sources = Sources(dsn="postgresql://x", kafka=KafkaSettings("k:9092"))
    text = exposition(metrics_of(state(0, 42, 10, errors={"kafka": "unreachable"}), sources))
    assert 'cdcbox_source_up{source="postgres"} 1.0' in text
    assert 'cdcbox_source_up{source="kafka"} 0.0' in text
    assert 'source="connect"' not in text  # not configured: not reported at all
    assert "cdcbox_outbox_appended_total 42.0" in text
    assert "# TYPE cdcbox_outbox_appended_total counter" in text
    assert "cdcbox_outbox_rows" not in text  # a CDC database has no polling backlog
    assert 'cdcbox_slot_retained_wal_bytes{slot="cdcbox_outbox"} 2.097152e+06' in text
    assert 'cdcbox_inbox_rows{consumer="inventory",status="FAILED"} 1.0' in text
    assert "cdcbox_inbox_estimated_rows 1e+06" in text
    assert 'cdcbox_inbox_finished_last_minute{consumer="inventory",status="PROCESSED"} 10.0' in text
    assert 'cdcbox_inbox_rows{consumer="inventory",status="PROCESSED"}' not in text
    assert 'cdcbox_parked_aggregates{consumer="inventory"} 2.0' in text
    assert (
        'cdcbox_connector_running{connector="cdcbox-outbox",state="RUNNING",task="-1"} 1.0' in text
    )
    assert 'cdcbox_connector_running{connector="cdcbox-outbox",state="FAILED",task="1"} 0.0' in text
    lag = 'cdcbox_consumer_group_lag{group="inventory-service",partition="0",'
    assert lag + 'topic="outbox.event.order"} 7.0' in text


def test_the_polling_backlog_is_exported_when_it_was_read() -> None:
    polling = state(0, 5, 0, outboxes=[OutboxState(5, pending=3, dead=1, oldest_pending_s=9.5)])
    text = exposition(metrics_of(polling, Sources(dsn="postgresql://x")))
    assert 'cdcbox_outbox_rows{state="pending"} 3.0' in text
    assert 'cdcbox_outbox_rows{state="dead"} 1.0' in text
    assert "cdcbox_outbox_oldest_pending_seconds 9.5" in text
    assert "cdcbox_outbox_emit_ready" not in text  # a table outbox: nothing to say


def test_the_outbox_without_a_table_exports_whether_it_can_emit() -> None:
    for ready, value in ((True, "1.0"), (False, "0.0")):
        text = exposition(
            metrics_of(state(0, 0, 0, outboxes=[OutboxState(0, emit_ready=ready)]),
                       Sources(dsn="postgresql://x"))
        )  # fmt: skip
        assert f"cdcbox_outbox_emit_ready {value}" in text
    shown = render(state(0, 0, 0, outboxes=[OutboxState(0, emit_ready=False)]))
    assert "REFUSING (slot)" in shown


def render(
    current: PipelineState,
    previous: PipelineState | None = None,
    still: dict[str, float] | None = None,
) -> str:
    console = Console(width=160, record=True, file=io.StringIO())
    console.print(frame(current, previous, still))
    return console.export_text()


def test_top_shows_rates_between_two_readings_and_dashes_without_one() -> None:
    first, second = state(100.0, 1_000, 50), state(102.0, 1_200, 90)
    text = render(second, first)
    assert "100.0" in text  # (1,200 - 1,000) appended in 2 s
    assert "1.5" in text  # 90 processed in the last 60 s
    assert "2.0 MiB" in text
    assert "0:RUNNING, 1:FAILED" in text
    alone = render(first)
    outbox_row = next(line for line in alone.splitlines() if "1,000" in line)
    assert "-" in outbox_row


def test_top_names_a_source_it_could_not_read_and_caps_the_lag_table() -> None:
    lags = [PartitionLag(f"g{i}", "t", 0, i) for i in range(MAX_LAG_ROWS + 5)]
    text = render(state(0, 1, 1, lags=lags, errors={"connect": "connection refused"}))
    assert "connect: not read (connection refused)" in text
    assert f"the {MAX_LAG_ROWS} furthest behind of {MAX_LAG_ROWS + 5} partitions" in text
    assert f"g{MAX_LAG_ROWS + 4}" in text  # the furthest behind is shown
    assert " g0 " not in text  # the least behind is not


def test_with_services_each_database_is_a_source_and_its_lines_are_named() -> None:
    """A fleet: the outbox and inbox families carry the service, each database is up or
    down on its own, and top leads those rows with the service."""
    services = (ServiceDb("orders", "postgresql://x/orders"), ServiceDb("points", "p"))
    reading = state(
        0,
        0,
        0,
        outboxes=[OutboxState(7, service="orders")],
        inbox=[InboxCount("points-service", "PROCESSED", 3, service="points")],
        errors={"postgres/points": "connection refused"},
    )
    text = exposition(metrics_of(reading, Sources(services=services)))
    assert 'cdcbox_source_up{source="postgres/orders"} 1.0' in text
    assert 'cdcbox_source_up{source="postgres/points"} 0.0' in text
    assert 'cdcbox_outbox_appended_total{service="orders"} 7.0' in text
    assert (
        'cdcbox_inbox_finished_last_minute{consumer="points-service",service="points",'
        'status="PROCESSED"}' in text
    )
    assert 'slot="cdcbox_outbox"' in text  # slots are the cluster's, read from orders
    frame_text = render(reading)
    assert any(
        line.split()[:2] == ["orders", "7"] for line in frame_text.replace("│", " ").splitlines()
    ), frame_text
    assert "points-service" in frame_text and "shop" in frame_text


def test_a_still_slot_and_open_transactions_are_shown_and_exported() -> None:
    """Issue 51: a slot whose confirmed position has not moved for 30 s while WAL waits
    after it is marked "still" in top (not sooner: the heartbeat moves a healthy one every
    10 s); the exporter serves its position and unconfirmed WAL, and each open
    transaction's age, with the hanging ones counted."""
    stuck = dataclasses.replace(SLOT, confirmed_flush_lsn="0/5", unconfirmed_bytes=4096)
    held = [
        TransactionState("cdcbox-connect-offsets", 0, "svc-1", 75.0, hanging=False),
        TransactionState("outbox.event.order", 2, "producer 9", 900.0, hanging=True),
    ]
    first = state(100.0, 1, 1, slots=[stuck])
    second = state(105.0, 1, 1, slots=[stuck], transactions=held)
    fake = FakeTime()
    clock = SlotClock(fake.clock)
    clock.observe(first)
    fake.sleep(29)
    assert "still" not in render(second, first, clock.observe(second))
    fake.sleep(2)
    text = render(second, first, clock.observe(second))
    assert "0/5 still 31 s" in text and "4,096 B" in text
    rows = [line for line in text.splitlines() if "producer 9" in line or "svc-1" in line]
    assert "outbox.event.order-2" in rows[0] and "HANGING" in rows[0]  # the oldest first
    assert "cdcbox-connect-offsets-0" in rows[1] and "HANGING" not in rows[1]
    assert "open Kafka transactions" not in render(first)

    served = exposition(metrics_of(second, Sources(dsn="x", kafka=KafkaSettings("k:9092"))))
    assert 'cdcbox_slot_confirmed_lsn{slot="cdcbox_outbox"} 5.0' in served
    assert 'cdcbox_slot_unconfirmed_wal_bytes{slot="cdcbox_outbox"} 4096.0' in served
    assert (
        'cdcbox_kafka_open_transaction_seconds{owner="svc-1",partition="0",'
        'topic="cdcbox-connect-offsets"} 75.0' in served
    )
    assert "cdcbox_kafka_hanging_transactions 1.0" in served
