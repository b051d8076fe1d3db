"""Points service: records the points an order will earn (one per whole currency unit).

Written once for both databases: `conn` is a `Session` and the SQL is plain, so the
fleet runs this service on MariaDB when the stack has one (consumer/fleet.py)."""

from __future__ import annotations

from cdcbox import Session
from cdcbox.consumer import Event, Handler

# Its table on MariaDB (consumer/schema.sql has the PostgreSQL one).
MARIADB_TABLES = (
    "CREATE TABLE IF NOT EXISTS points_pending (order_id VARCHAR(200) PRIMARY KEY, "
    "customer_id VARCHAR(200) NOT NULL, points BIGINT NOT NULL) ENGINE = InnoDB"
)


class PointsHandler(Handler):
    consumer_name = "points-service"
    aggregate_types = ("order",)
    event_types = frozenset({"OrderCreated"})

    def handle(self, event: Event, conn: Session) -> None:
        order = event.payload
        conn.execute(
            "INSERT INTO points_pending (order_id, customer_id, points) VALUES (%s, %s, %s)",
            (order["order_id"], order["customer_id"], order["total_cents"] // 100),
        )
