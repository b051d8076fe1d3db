"""The order service (producer side): an order, its lines, the stock check and the
OrderCreated event, all in one transaction, so the event exists if and only if the order does."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from cdcbox.producer.outbox import NewEvent, Outbox

SCHEMA = Path(__file__).with_name("schema.sql")


@dataclass(frozen=True)
class OrderLine:
    sku: str
    quantity: int
    price_cents: int


def create_schema(conn: psycopg.Connection[Any]) -> None:
    with conn.transaction():
        conn.execute(SCHEMA.read_text())


def place_order(
    conn: psycopg.Connection[Any],
    outbox: Outbox,
    order_id: str,
    customer_id: str,
    lines: list[OrderLine],
    coupon: str | None = None,
    trace_id: str | None = None,
) -> None:
    """Create the order and append OrderCreated; the caller's transaction commits both."""
    total = sum(line.quantity * line.price_cents for line in lines)
    conn.execute(
        "INSERT INTO orders (order_id, customer_id, total_cents) VALUES (%s, %s, %s)",
        (order_id, customer_id, total),
    )
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO order_lines (order_id, line_no, sku, quantity, price_cents) "
            "VALUES (%s, %s, %s, %s, %s)",
            [
                (order_id, i, line.sku, line.quantity, line.price_cents)
                for i, line in enumerate(lines, start=1)
            ],
        )
    outbox.append(
        conn,
        NewEvent(
            aggregate_type="order",
            aggregate_id=order_id,
            event_type="OrderCreated",
            aggregate_version=1,
            trace_id=trace_id,
            payload={
                "order_id": order_id,
                "customer_id": customer_id,
                "total_cents": total,
                "coupon": coupon,
                "lines": [
                    {"sku": line.sku, "quantity": line.quantity, "price_cents": line.price_cents}
                    for line in lines
                ],
            },
        ),
    )
