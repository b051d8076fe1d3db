"""The demo fleet as the compose file runs it: six services in containers, each on its
own database, published to by Debezium in the Connect container. The host only writes
orders (and payments) and reads back what each service applied."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import uuid
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from cdcbox import wire
from cdcbox.avro import Catalogue
from cdcbox.producer.outbox import Outbox
from cdcbox.resources import resource_dir
from consumer.demo import SKUS, write_orders
from consumer.fleet import FLEET, INVENTORY, ORDERS
from consumer.inventory import stock_up
from consumer.orders import record_payment
from tests.faults.ledger import Ledger, delivered_ids
from tests.helpers import eventually

# Each consume-only service's table, one row per order it applied (marketing: per coupon).
APPLIED_TABLES = {
    "points": "points_pending",
    "notifications": "notification_outgoing",
    "search": "order_search_index",
    "marketing": "coupon_redemption",
}


def new_run() -> str:
    return f"compose-{uuid.uuid4().hex[:8]}"


def place_orders(admin_dsn: str, run: str, count: int, rate: float = 0.0) -> None:
    """`count` orders of `run` (every fourth with a coupon), from two writers; stock for
    about a tenth of them, so inventory rejects some."""
    with psycopg.connect(INVENTORY.dsn(admin_dsn)) as conn, conn.transaction():
        stock_up(conn, SKUS, available=max(1, count // 10))
    schemas = Catalogue.load(resource_dir("schemas") / "avro")
    write_orders(ORDERS.dsn(admin_dsn), run, count, 2, schemas, rate)


def rows(dsn: str, query: sql.Composed | str, params: tuple[Any, ...]) -> Any:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(query, params).fetchone()
    return row[0] if row else None


def applied(admin_dsn: str, run: str) -> dict[str, int]:
    """Each consume-only service's rows for the run's orders, read from its database."""
    by_name = {service.name: service for service in FLEET}
    return {
        name: rows(
            by_name[name].dsn(admin_dsn),
            sql.SQL("SELECT count(*) FROM {} WHERE order_id LIKE %s").format(sql.Identifier(table)),
            (run + "-%",),
        )
        for name, table in APPLIED_TABLES.items()
    }


def expected(count: int) -> dict[str, int]:
    return {"points": count, "notifications": count, "search": count, "marketing": count // 4}


def answered(admin_dsn: str, run: str) -> int:
    """Orders of the run that inventory's answer confirmed or cancelled."""
    return int(
        rows(
            ORDERS.dsn(admin_dsn),
            "SELECT count(*) FROM orders WHERE order_id LIKE %s AND status <> 'CREATED'",
            (run + "-%",),
        )
    )


def await_first_hop(admin_dsn: str, run: str, count: int, timeout: float = 240) -> None:
    """Every service applied the run (at least: exactness is the caller's assertion) and
    every order was answered."""
    want = expected(count)
    eventually(
        lambda: (
            all(n >= want[name] for name, n in applied(admin_dsn, run).items())
            and answered(admin_dsn, run) >= count
        ),
        timeout=timeout,
        what=f"the {count} orders of {run} applied by every service and answered",
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
        outbox = Outbox(schemas=Catalogue.load(resource_dir("schemas") / "avro"))
        for order_id, total in conn.execute(
            "SELECT order_id, total_cents FROM orders WHERE order_id LIKE %s", like
        ).fetchall():
            record_payment(conn, outbox, order_id, total)
    eventually(
        lambda: (
            rows(
                orders_dsn,
                "SELECT (SELECT count(*) FROM orders WHERE order_id LIKE %s AND status = 'PAID')"
                " + (SELECT count(*) FROM consumer_reconciliation WHERE aggregate_id LIKE %s)",
                like * 2,
            )
            >= count
        ),
        timeout=timeout,
        what=f"every payment of {run} applied or reconciled",
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


def notifications_ledger(scenario: str, admin_dsn: str, bootstrap_servers: str, run: str) -> Ledger:
    """The run's OrderCreated events against the notifications service's effects (its
    table has no unique key: an event applied twice is two rows), and the copies of them
    on the order topic."""
    like = (run + "-%",)
    with psycopg.connect(ORDERS.dsn(admin_dsn)) as conn:
        committed = {
            str(r[0])
            for r in conn.execute(
                "SELECT event_id FROM outbox_event WHERE event_type = 'OrderCreated' "
                "AND aggregate_id LIKE %s",
                like,
            ).fetchall()
        }
    on_topic = delivered_ids(bootstrap_servers, wire.topic_for("order"))
    delivered = [event_id for event_id in on_topic if event_id in committed]
    with psycopg.connect(FLEET[4].dsn(admin_dsn)) as conn:
        effects = [
            r[0]
            for r in conn.execute(
                "SELECT order_id FROM notification_outgoing WHERE order_id LIKE %s", like
            ).fetchall()
        ]
    distinct = set(effects)
    return Ledger(
        scenario=scenario,
        committed=len(committed),
        delivered=len(delivered),
        duplicates=len(delivered) - len(set(delivered)),
        applied=len(distinct),
        double_effects=len(effects) - len(distinct),
        lost=len(committed) - len(distinct),
        order_violations=0,  # one event per order: no per-aggregate order to hold
        rolled_back_seen=0,
    )


def container_id(project: str, service: str) -> str:
    out = subprocess.run(
        ["docker", "ps", "-q", "--filter", f"label=com.docker.compose.project={project}",
         "--filter", f"label=com.docker.compose.service={service}"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert len(out) == 1, f"one running {service} container expected, found {out}"
    return out[0]


def inspect(container: str) -> dict[str, Any]:
    """`docker inspect` of one container."""
    out = subprocess.run(
        ["docker", "inspect", container], capture_output=True, text=True, check=True
    ).stdout
    found: dict[str, Any] = json.loads(out)[0]
    return found


def sigkill(container: str) -> int:
    """SIGKILL the container's main process by its pid, as a crash or the kernel's OOM
    killer would: unlike `docker kill`, the container's restart policy then applies.
    Returns the container's restart count before the kill."""
    before = inspect(container)
    os.kill(int(before["State"]["Pid"]), signal.SIGKILL)
    return int(before["RestartCount"])


def restarted(container: str, restarts_before: int) -> bool:
    """The container came back (its restart policy) and reports healthy."""
    now = inspect(container)
    health = now["State"].get("Health", {}).get("Status")
    return int(now["RestartCount"]) > restarts_before and health == "healthy"
