"""The demo: the order example as a fleet, each service on a database of its own
(`consumer.fleet`). Orders are written with their OrderCreated events in one
transaction; five services apply them; inventory answers each from its own outbox
(StockReserved or StockRejected), and orders confirms or cancels on that answer (the
way back); a payment arriving for a cancelled order lands in reconciliation. Then
everything is redelivered to inventory to show that it changes nothing and emits
nothing again. Prints each hop's counts and the round trip's latency.
Run by scripts/demo against a live stack."""

from __future__ import annotations

import argparse
import os
import random
import statistics
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg
from kafka import KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata

from cdcbox import wire
from cdcbox.avro import Catalogue
from cdcbox.connect.client import ConnectClient
from cdcbox.connect.connectors import ConnectorSpec
from cdcbox.consumer import Consumer, ConsumerConfig, Outcome
from cdcbox.consumer.stats import ConsumerStats
from cdcbox.producer.outbox import Outbox
from cdcbox.resources import resource_dir
from consumer.fleet import (
    FLEET,
    INVENTORY,
    ORDERS,
    FleetService,
    debezium_password_from_env,
    emits_messages,
    prepare,
    producing_specs,
    service_names,
)
from consumer.inventory import ANSWER_AGGREGATE, stock_up
from consumer.orders import OrderLine, paid_or_reconciled, pay_every_order, place_order

ORDER_TOPIC = wire.topic_for("order")
ANSWER_TOPIC = wire.topic_for(ANSWER_AGGREGATE)
SKUS = [f"sku-{n}" for n in range(50)]


@dataclass
class FleetRun:
    """What one run of the fleet did, hop by hop, read back from each service's database."""

    run: str
    orders: int
    wrote_s: float = 0.0
    answered_s: float = 0.0
    stats: dict[str, ConsumerStats] = field(default_factory=dict)
    answers: Counter[str] = field(default_factory=Counter)  # inventory published, by type
    answered_orders: int = 0  # distinct orders inventory answered
    statuses: Counter[str] = field(default_factory=Counter)  # once answered
    round_trip_ms: list[float] = field(default_factory=list)
    final_statuses: Counter[str] = field(default_factory=Counter)  # after the payments
    reconciled: int = 0
    replay: ConsumerStats = field(default_factory=ConsumerStats)
    answers_after_replay: int = 0


def write_orders(
    dsn: str, run: str, count: int, writers: int, schemas: Catalogue, rate: float
) -> None:
    """`count` orders from `writers` threads, paced to `rate` orders/s in all (0: as fast
    as they go)."""
    outbox = Outbox(schemas=schemas)  # OrderCreated is Avro-encoded (schemas/avro/events.yaml)

    def writer(index: int) -> None:
        rng = random.Random(index)
        interval = writers / rate if rate else 0.0
        next_at = time.monotonic()
        with psycopg.connect(dsn) as conn:
            for n in range(index, count, writers):
                next_at += interval
                pause = next_at - time.monotonic()
                if pause > 0:
                    time.sleep(pause)  # pacing the writer, not synchronisation
                lines = [
                    OrderLine(sku, rng.randint(1, 3), rng.randrange(100, 5000))
                    for sku in rng.sample(SKUS, 3)
                ]
                with conn.transaction():
                    place_order(
                        conn,
                        outbox,
                        f"{run}-{n}",
                        f"customer-{rng.randrange(200)}",
                        lines,
                        coupon="WELCOME" if n % 4 == 0 else None,
                    )

    threads = [threading.Thread(target=writer, args=(i,)) for i in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def until(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    """Poll `condition` until it holds; SystemExit naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"demo: {what} not reached within {timeout_s:.0f}s")
        time.sleep(0.1)


def one(dsn: str, query: str, params: tuple[Any, ...]) -> Any:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(query, params).fetchone()
    return row[0] if row else None


def end_offsets(bootstrap: str, topic: str) -> dict[TopicPartition, int]:
    probe = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    try:
        partitions = [TopicPartition(topic, p) for p in probe.partitions_for_topic(topic) or ()]
        return dict(probe.end_offsets(partitions)) if partitions else {}
    finally:
        probe.close()


def rewind(bootstrap: str, group: str, offsets: dict[TopicPartition, int]) -> None:
    """What an operator's `groups reset` does: move an idle group back."""
    committer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        committer.assign(list(offsets))
        committer.commit({tp: OffsetAndMetadata(o, "", -1) for tp, o in offsets.items()})
    finally:
        committer.close(autocommit=False)


def service_consumer(
    service: FleetService,
    admin_dsn: str,
    bootstrap: str,
    schemas: Catalogue,
    specs: dict[str, ConnectorSpec] | None = None,
    mariadb_dsn: str | None = None,
    **options: Any,
) -> Consumer:
    """A consumer of `service`'s handlers on its own database (on MariaDB where it is
    portable and `mariadb_dsn` is given), in the group named after it; its handlers emit
    to the outbox its spec reads (`specs`: the shipped fleet's)."""
    specs = specs or producing_specs()
    return Consumer(
        [handler() for handler in service.handlers],
        ConsumerConfig(
            bootstrap_servers=bootstrap,
            dsn=service.dsn(admin_dsn, mariadb_dsn),
            group_id=service.name,
            schemas=schemas,
            emit_messages=emits_messages(service, specs),
            **options,
        ),
        service_names(service, specs),
    )


def start_fleet(
    admin_dsn: str,
    bootstrap: str,
    schemas: Catalogue,
    specs: dict[str, ConnectorSpec] | None = None,
    mariadb_dsn: str | None = None,
) -> tuple[dict[str, Consumer], list[threading.Thread]]:
    """One consumer per service, on its own database, running in threads, each with its
    partitions assigned when this returns."""
    consumers = {
        service.name: service_consumer(
            service,
            admin_dsn,
            bootstrap,
            schemas,
            specs,
            mariadb_dsn,
            batch_mode=True,
            # A new group starts at the topics' end: a stack that ran other things holds
            # older events of these aggregate types (topics are by aggregate type,
            # whoever wrote them), and the demo writes only once every service has its
            # partitions.
            auto_offset_reset="latest",
        )
        for service in FLEET
    }
    threads = [threading.Thread(target=c.run, daemon=True) for c in consumers.values()]
    for thread in threads:
        thread.start()
    until(lambda: all(c.assigned() for c in consumers.values()), 60, "every service assigned")
    return consumers, threads


def run_fleet(
    admin_dsn: str,
    bootstrap: str,
    orders: int,
    writers: int,
    rate: float,
    timeout_s: float,
    specs: dict[str, ConnectorSpec] | None = None,
    mariadb_dsn: str | None = None,
) -> FleetRun:
    """Prepare the fleet (idempotent), run it once over `orders` orders, read back what
    each hop did. Raises SystemExit when a hop does not finish within `timeout_s`.
    `specs`: the producing services' connector specs (the shipped `connectors/fleet/`)."""
    result = FleetRun(run=f"demo-{uuid.uuid4().hex[:8]}", orders=orders)
    orders_dsn, inventory_dsn = ORDERS.dsn(admin_dsn), INVENTORY.dsn(admin_dsn)
    prepare(
        admin_dsn,
        ConnectClient(os.environ["CDCBOX_CONNECT_URL"]),
        debezium_password_from_env(),
        specs=specs,
        mariadb_dsn=mariadb_dsn,
    )
    with psycopg.connect(inventory_dsn) as conn, conn.transaction():
        stock_up(conn, SKUS, available=max(1, orders // 10))  # some orders will be short
    schemas = Catalogue.load(resource_dir("schemas") / "avro")
    starts = end_offsets(bootstrap, ORDER_TOPIC)
    consumers, threads = start_fleet(admin_dsn, bootstrap, schemas, specs, mariadb_dsn)
    like = (result.run + "-%",)
    try:
        began = time.monotonic()
        write_orders(orders_dsn, result.run, orders, writers, schemas, rate)
        result.wrote_s = time.monotonic() - began
        until(
            lambda: (
                one(
                    orders_dsn,
                    "SELECT count(*) FROM orders WHERE order_id LIKE %s AND status <> 'CREATED'",
                    like,
                )
                >= orders
            ),
            timeout_s,
            "every order answered by inventory",
        )
        result.answered_s = time.monotonic() - began
        with psycopg.connect(orders_dsn) as conn:
            rows = conn.execute(
                "SELECT status, extract(epoch FROM status_changed_at - created_at) * 1000 "
                "FROM orders WHERE order_id LIKE %s",
                like,
            ).fetchall()
            result.statuses = Counter(status for status, _ in rows)
            result.round_trip_ms = sorted(float(ms) for _, ms in rows)
            with conn.transaction():  # the payment provider reports every order paid
                pay_every_order(conn, Outbox(schemas=schemas), like[0])
        until(
            lambda: paid_or_reconciled(orders_dsn, like[0]) >= orders,
            timeout_s,
            "every payment applied or reconciled",
        )
        until(
            lambda: all(
                c.stats[Outcome.PROCESSED] + c.stats[Outcome.SKIPPED] >= orders
                for name, c in consumers.items()
                if name not in (ORDERS.name,)
            ),
            timeout_s,
            "every OrderCreated applied by every service",
        )
    finally:
        for c in consumers.values():
            c.stop()
        for thread in threads:
            thread.join(timeout=30)  # each leaves its group: inventory's is rewound next
    result.stats = {name: c.stats for name, c in consumers.items()}
    _read_back(result, orders_dsn, bootstrap)
    _replay_to_inventory(result, admin_dsn, bootstrap, starts, schemas, timeout_s, specs)
    return result


def answers_on_topic(bootstrap: str, run: str) -> list[tuple[str, str]]:
    """(event type, order id) of every answer of the run inventory published, as a
    read_committed reader sees them: what it emitted, whichever outbox it has."""
    reader = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=None,
        enable_auto_commit=False,
        isolation_level="read_committed",
    )
    try:
        partitions = reader.partitions_for_topic(ANSWER_TOPIC) or set()
        tps = [TopicPartition(ANSWER_TOPIC, p) for p in partitions]
        reader.assign(tps)
        reader.seek_to_beginning(*tps)
        ends = reader.end_offsets(tps)
        found: list[tuple[str, str]] = []
        while any(reader.position(tp) < end for tp, end in ends.items()):
            for records in reader.poll(timeout_ms=500).values():
                found += [
                    (dict(r.headers).get("event_type", b"").decode(), r.key.decode())
                    for r in records
                    if r.key and r.key.decode().startswith(run + "-")
                ]
        return found
    finally:
        reader.close()


def _read_back(result: FleetRun, orders_dsn: str, bootstrap: str) -> None:
    answers = answers_on_topic(bootstrap, result.run)
    result.answers = Counter(event_type for event_type, _ in answers)
    result.answered_orders = len({order for _, order in answers})
    like = (result.run + "-%",)
    with psycopg.connect(orders_dsn) as conn:
        result.final_statuses = Counter(
            dict(
                conn.execute(
                    "SELECT status, count(*) FROM orders WHERE order_id LIKE %s GROUP BY 1", like
                ).fetchall()
            )
        )
        result.reconciled = conn.execute(
            "SELECT count(*) FROM consumer_reconciliation WHERE aggregate_id LIKE %s", like
        ).fetchone()[0]  # type: ignore[index]


def _replay_to_inventory(
    result: FleetRun,
    admin_dsn: str,
    bootstrap: str,
    starts: dict[TopicPartition, int],
    schemas: Catalogue,
    timeout_s: float,
    specs: dict[str, ConnectorSpec] | None = None,
) -> None:
    """Every OrderCreated of the run again to inventory: the inbox drops each copy, and
    no answer is emitted twice."""
    rewind(
        bootstrap, INVENTORY.name, starts or {TopicPartition(ORDER_TOPIC, p): 0 for p in range(3)}
    )
    replay = service_consumer(INVENTORY, admin_dsn, bootstrap, schemas, specs)
    thread = threading.Thread(target=replay.run, daemon=True)
    thread.start()
    try:
        until(lambda: replay.stats[Outcome.DUPLICATE] >= result.orders, timeout_s, "the replay")
    finally:
        replay.stop()
        thread.join(timeout=30)
    result.replay = replay.stats
    result.answers_after_replay = len(answers_on_topic(bootstrap, result.run))


def print_summary(r: FleetRun, writers: int, rate: float) -> None:
    print(
        f"run {r.run}: {r.orders} orders (OrderCreated as Avro) written to the orders "
        f"database by {writers} writers in {r.wrote_s:.1f}s ({r.orders / r.wrote_s:.0f} orders/s"
        + (f", {rate:.0f}/s asked)" if rate else ", a burst)")
    )
    print("hop 1, orders → the five services, each on its own database:")
    for name, stats in r.stats.items():
        if name != ORDERS.name:
            print(f"  {name:<14} {_outcomes(stats)}")
    print(
        f"hop 2, inventory → orders (the way back): {r.answers['StockReserved']} "
        f"StockReserved, {r.answers['StockRejected']} StockRejected published by inventory "
        f"for {r.answered_orders} orders; orders {r.statuses['CONFIRMED']} confirmed, "
        f"{r.statuses['CANCELLED']} cancelled"
    )
    if r.round_trip_ms:
        print(
            f"round trip (order committed → its confirmation committed, through both "
            f"connectors): p50 {statistics.median(r.round_trip_ms):.0f} ms, p99 "
            f"{r.round_trip_ms[int(0.99 * (len(r.round_trip_ms) - 1))]:.0f} ms; every order "
            f"answered {r.answered_s:.1f}s after the first was written"
        )
    print(
        f"payments: {r.final_statuses['PAID']} orders paid, {r.reconciled} payments for "
        f"cancelled orders in reconciliation (orders' consumer: {_outcomes(r.stats[ORDERS.name])}, "
        f"refused={r.stats[ORDERS.name][Outcome.REFUSED]})"
    )
    print(
        f"replay to inventory: duplicates skipped={r.replay[Outcome.DUPLICATE]}, applied "
        f"again={r.replay[Outcome.PROCESSED]}; answers on the topic: "
        f"{r.answers_after_replay} (exactly one per order)"
    )


def _outcomes(stats: ConsumerStats) -> str:
    return (
        f"processed={stats[Outcome.PROCESSED]:<6} skipped={stats[Outcome.SKIPPED]:<5} "
        f"dead-lettered={stats[Outcome.DEAD_LETTERED]}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--orders", type=int, default=1000)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument(
        "--rate",
        type=float,
        default=50,
        help="Orders/s, steady; the six consumers and the writers share this one process "
        "(0: a burst as fast as the writers go; the round trip then includes the queue).",
    )
    parser.add_argument("--timeout", type=float, default=180)
    args = parser.parse_args()
    result = run_fleet(
        os.environ["CDCBOX_DSN"],
        os.environ["CDCBOX_BOOTSTRAP_SERVERS"],
        args.orders,
        args.writers,
        args.rate,
        args.timeout,
        mariadb_dsn=os.environ.get("CDCBOX_MARIADB_DSN"),
    )
    print_summary(result, args.writers, args.rate)


if __name__ == "__main__":
    main()
