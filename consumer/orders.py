"""The order service. Producer side: an order, its lines and the OrderCreated event in
one transaction, so the event exists if and only if the order does; a payment the
provider reports, as PaymentSucceeded. Consumer side (the way back): inventory's answer
confirms or cancels the order; a payment is applied to the order it pays, and a payment
for a cancelled order is refused into reconciliation (money to give back, not lost)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg

from cdcbox.consumer import Event, Handler
from cdcbox.consumer.signals import RefuseTransition, RetryLater, SkipEvent
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


def record_payment(
    conn: psycopg.Connection[Any], outbox: Outbox, order_id: str, amount_cents: int
) -> None:
    """The payment provider's callback: recorded as PaymentSucceeded (points and
    notifications may listen too); `PaymentHandler` applies it to the order."""
    outbox.append(
        conn,
        NewEvent(
            aggregate_type="payment",
            aggregate_id=order_id,
            event_type="PaymentSucceeded",
            aggregate_version=1,
            payload={
                "order_id": order_id,
                "payment_id": f"pay-{order_id}",
                "amount_cents": amount_cents,
            },
        ),
    )


def pay_every_order(conn: psycopg.Connection[Any], outbox: Outbox, like: str) -> None:
    """Every order whose id is LIKE `like` reported paid (`record_payment`), in the
    caller's transaction."""
    for order_id, total in conn.execute(
        "SELECT order_id, total_cents FROM orders WHERE order_id LIKE %s", (like,)
    ).fetchall():
        record_payment(conn, outbox, order_id, total)


def paid_or_reconciled(dsn: str, like: str) -> int:
    """Orders LIKE `like` that `PaymentHandler` marked PAID, plus their payments it put
    in reconciliation (the order was cancelled first): every payment, once applied."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM orders WHERE order_id LIKE %s AND status = 'PAID')"
            " + (SELECT count(*) FROM consumer_reconciliation WHERE aggregate_id LIKE %s)",
            (like, like),
        ).fetchone()
    return int(row[0]) if row else 0


class OrderStatusHandler(Handler):
    """Inventory's answer: StockReserved confirms the order, StockRejected cancels it."""

    consumer_name = "orders-stock-answers"
    aggregate_types = ("stock",)
    event_types = frozenset({"StockReserved", "StockRejected"})

    def handle(self, event: Event, conn: psycopg.Connection[Any]) -> None:
        status = "CONFIRMED" if event.event_type == "StockReserved" else "CANCELLED"
        if not conn.execute(
            "UPDATE orders SET status = %s, status_changed_at = clock_timestamp() "
            "WHERE order_id = %s AND status = 'CREATED'",
            (status, event.aggregate_id),
        ).rowcount:
            raise SkipEvent(f"order {event.aggregate_id} is not ours or not awaiting stock")


class PaymentHandler(Handler):
    """A payment marks its confirmed order PAID; one for a cancelled order is refused
    (reconciliation), one that overtook the stock answer waits for it."""

    consumer_name = "orders-payments"
    aggregate_types = ("payment",)
    event_types = frozenset({"PaymentSucceeded"})

    def handle(self, event: Event, conn: psycopg.Connection[Any]) -> None:
        row = conn.execute(
            "SELECT status FROM orders WHERE order_id = %s FOR UPDATE", (event.aggregate_id,)
        ).fetchone()
        if row is None:
            raise SkipEvent(f"order {event.aggregate_id} is not ours")
        if row[0] == "CANCELLED":
            raise RefuseTransition(f"payment for cancelled order {event.aggregate_id}")
        if row[0] == "CREATED":  # the stock answer is still on its way
            raise RetryLater(f"order {event.aggregate_id} awaits its stock answer")
        conn.execute(
            "UPDATE orders SET status = 'PAID', status_changed_at = clock_timestamp() "
            "WHERE order_id = %s",
            (event.aggregate_id,),
        )
