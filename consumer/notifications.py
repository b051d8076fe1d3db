"""Notification gateway: queues the order confirmation (its own outbox of messages)."""

from __future__ import annotations

from typing import Any

import psycopg

from cdcbox.consumer import Event, Handler


class NotificationHandler(Handler):
    consumer_name = "notifications"
    aggregate_types = ("order",)
    event_types = frozenset({"OrderCreated"})

    def handle(self, event: Event, conn: psycopg.Connection[Any]) -> None:
        order = event.payload
        conn.execute(
            "INSERT INTO notification_outgoing (order_id, channel, body) VALUES (%s, %s, %s)",
            (
                order["order_id"],
                "email",
                f"Order {order['order_id']} confirmed: {order['total_cents'] / 100:.2f}",
            ),
        )
