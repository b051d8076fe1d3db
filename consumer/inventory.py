"""Inventory service: reserves stock for each created order."""

from __future__ import annotations

from typing import Any

import psycopg

from cdcbox.consumer import Event, Handler


class InventoryHandler(Handler):
    consumer_name = "inventory-service"
    aggregate_types = ("order",)
    event_types = frozenset({"OrderCreated"})

    def handle(self, event: Event, conn: psycopg.Connection[Any]) -> None:
        order = event.payload
        for line in order["lines"]:
            conn.execute(
                "INSERT INTO inventory_reservation (order_id, sku, quantity) VALUES (%s, %s, %s)",
                (order["order_id"], line["sku"], line["quantity"]),
            )
            conn.execute(
                "INSERT INTO stock (sku, available, reserved) VALUES (%s, 0, %s) "
                "ON CONFLICT (sku) DO UPDATE SET reserved = stock.reserved + EXCLUDED.reserved",
                (line["sku"], line["quantity"]),
            )
