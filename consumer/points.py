"""Points service: records the points an order will earn (one per whole currency unit)."""

from __future__ import annotations

from typing import Any

import psycopg

from cdcbox.consumer import Event, Handler


class PointsHandler(Handler):
    consumer_name = "points-service"
    aggregate_types = ("order",)
    event_types = frozenset({"OrderCreated"})

    def handle(self, event: Event, conn: psycopg.Connection[Any]) -> None:
        order = event.payload
        conn.execute(
            "INSERT INTO points_pending (order_id, customer_id, points) VALUES (%s, %s, %s)",
            (order["order_id"], order["customer_id"], order["total_cents"] // 100),
        )
