"""Marketing service: redeems the order's coupon, once."""

from __future__ import annotations

from typing import Any

import psycopg

from cdcbox.consumer import Event, Handler
from cdcbox.consumer.signals import SkipEvent


class CouponHandler(Handler):
    consumer_name = "marketing-coupons"
    aggregate_types = ("order",)
    event_types = frozenset({"OrderCreated"})

    def handle(self, event: Event, conn: psycopg.Connection[Any]) -> None:
        coupon = event.payload.get("coupon")
        if not coupon:
            raise SkipEvent("order has no coupon")
        conn.execute(
            "INSERT INTO coupon_redemption (order_id, coupon_code) VALUES (%s, %s)",
            (event.payload["order_id"], coupon),
        )
