"""The demo against a fleet that runs elsewhere: the compose file's six services in
their containers (`cdc-ctl stack up --mode compose`). This process only writes orders
and payments, as the orders service's own code would, and reads back from each
service's database what it applied: every hop's counts, which must be exact.

    eval "$(cdc-ctl stack up --mode compose)"
    python -m consumer.compose_demo --orders 200

tests/compose run the same calls (tests/compose/test_fleet_in_containers.py)."""

from __future__ import annotations

import argparse
import os
import uuid
from dataclasses import dataclass
from typing import Any

import psycopg

from cdcbox.avro import Catalogue
from cdcbox.dsn import database_kind
from cdcbox.mariadb.session import open_session
from cdcbox.producer.outbox import Outbox
from cdcbox.resources import resource_dir
from cdcbox.schema_registry import RegistryConfig, SchemaRegistry
from consumer.fleet import FLEET, INVENTORY, ORDERS
from consumer.fleet_run import SKUS, until, write_orders
from consumer.inventory import stock_up
from consumer.orders import paid_or_reconciled, pay_every_order

# Each consume-only service's table, one row per order it applied (marketing: per coupon).
APPLIED_TABLES = {
    "points": "points_pending",
    "notifications": "notification_outgoing",
    "search": "order_search_index",
    "marketing": "coupon_redemption",
}


def new_run() -> str:
    return f"compose-{uuid.uuid4().hex[:8]}"


def place_orders(
    admin_dsn: str, run: str, count: int, rate: float = 0.0, registry_url: str | None = None
) -> None:
    """`count` orders of `run` (every fourth with a coupon), from two writers; stock for
    about a tenth of them, so inventory rejects some. With `registry_url`, OrderCreated
    is written in the Confluent wire format through that schema registry."""
    with psycopg.connect(INVENTORY.dsn(admin_dsn)) as conn, conn.transaction():
        stock_up(conn, SKUS, available=max(1, count // 10))
    schemas = Catalogue.load(resource_dir("schemas") / "avro")
    if registry_url:
        schemas = schemas.with_registry(SchemaRegistry(RegistryConfig(registry_url)))
    write_orders(ORDERS.dsn(admin_dsn), run, count, 2, schemas, rate)


def rows(dsn: str, query: str, params: tuple[Any, ...]) -> Any:
    """The first column of the first row of `query` on `dsn` (PostgreSQL or MariaDB)."""
    if database_kind(dsn) == "MariaDB":
        session = open_session(dsn)
        try:
            row = session.execute(query, params).fetchone()
        finally:
            session.close()
    else:
        with psycopg.connect(dsn) as conn:
            row = conn.execute(query, params).fetchone()
    return row[0] if row else None


def applied(admin_dsn: str, run: str, mariadb_dsn: str | None = None) -> dict[str, int]:
    """Each consume-only service's rows for the run's orders, read from its database
    (points' on the MariaDB server of `mariadb_dsn`, as the compose stack runs it)."""
    by_name = {service.name: service for service in FLEET}
    return {  # the table names are plain identifiers: no quoting needed
        name: rows(
            by_name[name].dsn(admin_dsn, mariadb_dsn),
            f"SELECT count(*) FROM {table} WHERE order_id LIKE %s",
            (run + "-%",),
        )
        for name, table in APPLIED_TABLES.items()
    }


def expected(count: int) -> dict[str, int]:
    """Rows per service for `count` orders: one each; marketing one per coupon (orders
    0, 4, 8, ...)."""
    coupons = len(range(0, count, 4))
    return {"points": count, "notifications": count, "search": count, "marketing": coupons}


def answered(admin_dsn: str, run: str) -> int:
    """Orders of the run that inventory's answer confirmed or cancelled."""
    return int(
        rows(
            ORDERS.dsn(admin_dsn),
            "SELECT count(*) FROM orders WHERE order_id LIKE %s AND status <> 'CREATED'",
            (run + "-%",),
        )
    )


def await_first_hop(
    admin_dsn: str, run: str, count: int, timeout: float = 240, mariadb_dsn: str | None = None
) -> None:
    """Every service applied the run (at least: exactness is the caller's assertion) and
    every order was answered."""
    want = expected(count)
    until(
        lambda: (
            all(n >= want[name] for name, n in applied(admin_dsn, run, mariadb_dsn).items())
            and answered(admin_dsn, run) >= count
        ),
        timeout,
        f"the {count} orders of {run} applied by every service and answered",
    )


@dataclass(frozen=True)
class RoundTrip:
    answers: dict[str, int]  # inventory's outbox for the run, by event type
    answered_orders: int  # distinct orders inventory answered
    statuses: dict[str, int]  # orders' statuses after the payments
    reconciled: int


def pay_and_read_back(admin_dsn: str, run: str, count: int, timeout: float = 180) -> RoundTrip:
    """Every order of the run paid (from the host), then what each hop of the way back
    did, read from the orders and inventory databases."""
    like = (run + "-%",)
    orders_dsn = ORDERS.dsn(admin_dsn)
    with psycopg.connect(orders_dsn) as conn, conn.transaction():
        schemas = Catalogue.load(resource_dir("schemas") / "avro")
        pay_every_order(conn, Outbox(schemas=schemas), like[0])
    until(
        lambda: paid_or_reconciled(orders_dsn, like[0]) >= count,
        timeout,
        f"every payment of {run} applied or reconciled",
    )
    with psycopg.connect(INVENTORY.dsn(admin_dsn)) as conn:
        answers: dict[str, int] = dict(
            conn.execute(
                "SELECT event_type, count(*) FROM outbox_event WHERE aggregate_type = 'stock' "
                "AND aggregate_id LIKE %s GROUP BY 1",
                like,
            ).fetchall()
        )
        distinct = conn.execute(
            "SELECT count(DISTINCT aggregate_id) FROM outbox_event WHERE aggregate_id LIKE %s",
            like,
        ).fetchone()
    with psycopg.connect(orders_dsn) as conn:
        statuses: dict[str, int] = dict(
            conn.execute(
                "SELECT status, count(*) FROM orders WHERE order_id LIKE %s GROUP BY 1", like
            ).fetchall()
        )
        reconciled = conn.execute(
            "SELECT count(*) FROM consumer_reconciliation WHERE aggregate_id LIKE %s", like
        ).fetchone()
    return RoundTrip(
        answers, int(distinct[0]) if distinct else 0, statuses, reconciled[0] if reconciled else 0
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--orders", type=int, default=200)
    parser.add_argument("--timeout", type=float, default=240)
    args = parser.parse_args()
    admin_dsn, run = os.environ["CDCBOX_DSN"], new_run()
    mariadb_dsn = os.environ.get("CDCBOX_MARIADB_DSN")
    place_orders(admin_dsn, run, args.orders)
    await_first_hop(admin_dsn, run, args.orders, args.timeout, mariadb_dsn)
    print(f"run {run}: {args.orders} orders written to the orders database")
    print("hop 1, orders → the services in their containers (rows each applied):")
    for name, count in applied(admin_dsn, run, mariadb_dsn).items():
        print(f"  {name:<14} {count} (expected {expected(args.orders)[name]})")
    trip = pay_and_read_back(admin_dsn, run, args.orders, args.timeout)
    print(
        f"hop 2, inventory → orders: {trip.answers} for {trip.answered_orders} orders; "
        f"after the payments: {trip.statuses}, {trip.reconciled} reconciled"
    )


if __name__ == "__main__":
    main()
