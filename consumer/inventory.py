"""Inventory service: reserves stock for each created order, every line or none, and
answers from its own outbox — StockReserved or StockRejected — in the same transaction."""

from __future__ import annotations

from typing import Any

import psycopg

from cdcbox.consumer import Event, Handler, NewEvent

# The answer's aggregate: the order's reservation (key: the order id).
ANSWER_AGGREGATE = "stock"


class InventoryHandler(Handler):
    consumer_name = "inventory-service"
    aggregate_types = ("order",)
    event_types = frozenset({"OrderCreated"})

    def handle(self, event: Event, conn: psycopg.Connection[Any]) -> None:
        order = event.payload
        try:
            with conn.transaction():  # a savepoint: every line reserved or none
                for line in order["lines"]:
                    _reserve(conn, order["order_id"], line["sku"], line["quantity"])
            answer, detail = "StockReserved", {}
        except LookupError as short:
            answer, detail = "StockRejected", {"short_of": short.args[0]}
        self.emit(
            conn,
            event,
            NewEvent(
                aggregate_type=ANSWER_AGGREGATE,
                aggregate_id=order["order_id"],
                event_type=answer,
                aggregate_version=1,  # one answer per order
                payload={"order_id": order["order_id"], **detail},
            ),
        )


def _reserve(conn: psycopg.Connection[Any], order_id: str, sku: str, quantity: int) -> None:
    """Take `quantity` of `sku` from what is available, or raise LookupError(sku)."""
    if not conn.execute(
        "UPDATE stock SET available = available - %s, reserved = reserved + %s "
        "WHERE sku = %s AND available >= %s",
        (quantity, quantity, sku, quantity),
    ).rowcount:
        raise LookupError(sku)
    conn.execute(
        "INSERT INTO inventory_reservation (order_id, sku, quantity) VALUES (%s, %s, %s)",
        (order_id, sku, quantity),
    )


def stock_up(conn: psycopg.Connection[Any], skus: list[str], available: int) -> None:
    """Put `available` of each sku on the shelf (what the demo starts with)."""
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO stock (sku, available) VALUES (%s, %s) "
            "ON CONFLICT (sku) DO UPDATE SET available = EXCLUDED.available, reserved = 0",
            [(sku, available) for sku in skus],
        )
