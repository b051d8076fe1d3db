"""The compose demo's expected rows: marketing applies one per coupon, and the writers
put a coupon on orders 0, 4, 8, ... (consumer.demo.write_orders)."""

from __future__ import annotations

from consumer.compose_demo import expected


def test_marketing_expects_one_row_per_couponed_order() -> None:
    for count in (1, 4, 120, 150):
        assert expected(count)["marketing"] == len([n for n in range(count) if n % 4 == 0])
