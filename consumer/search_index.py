"""Search service: keeps a near-real-time order index (last version wins)."""

from __future__ import annotations

from typing import Any

import psycopg

from cdcbox.consumer import Event, Handler


class SearchIndexHandler(Handler):
    consumer_name = "search-index"
    aggregate_types = ("order",)
    event_types = frozenset({"OrderCreated"})

    def handle(self, event: Event, conn: psycopg.Connection[Any]) -> None:
        order = event.payload
        conn.execute(
            "INSERT INTO order_search_index (order_id, customer_id, skus, total_cents, version) "
            "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (order_id) DO UPDATE SET "
            "skus = EXCLUDED.skus, total_cents = EXCLUDED.total_cents, version = EXCLUDED.version",
            (
                order["order_id"],
                order["customer_id"],
                [line["sku"] for line in order["lines"]],
                order["total_cents"],
                event.aggregate_version or 0,
            ),
        )
