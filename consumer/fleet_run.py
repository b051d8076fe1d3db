"""One run of the demo fleet (`consumer.fleet`): prepared, its services' consumers
started, orders written, every hop waited for and read back, then everything redelivered
to inventory (`consumer.demo` prints it; `tests/e2e/test_fleet.py` asserts it)."""

from __future__ import annotations

import os
import random
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import psycopg

from cdcbox import wire
from cdcbox.avro import Catalogue
from cdcbox.connect.client import ConnectClient
from cdcbox.connect.connectors import ConnectorSpec
from cdcbox.consumer import Consumer, ConsumerConfig, Outcome
from cdcbox.consumer.stats import ConsumerStats
from cdcbox.kafka.client import KafkaSettings, TopicPartition
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
from consumer.fleet_kafka import FleetKafka, end_offsets, keys_and_types, rewind
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


def service_consumer(
    service: FleetService,
    admin_dsn: str,
    kafka: FleetKafka,
    schemas: Catalogue,
    specs: dict[str, ConnectorSpec] | None = None,
    mariadb_dsn: str | None = None,
    **options: Any,
) -> Consumer:
    """A consumer of `service`'s handlers on its own database (on MariaDB where it is
    portable and `mariadb_dsn` is given), in the group named after it, logged in as its
    own principal where `kafka` names one; its handlers emit to the outbox its spec reads
    (`specs`: the shipped fleet's)."""
    specs = specs or producing_specs()
    return Consumer(
        [handler() for handler in service.handlers],
        ConsumerConfig(
            bootstrap_servers=kafka.bootstrap,
            kafka_security=kafka.security_of(service),
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
    kafka: FleetKafka,
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
            kafka,
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
    kafka: FleetKafka | str,
    orders: int,
    writers: int,
    rate: float,
    timeout_s: float,
    specs: dict[str, ConnectorSpec] | None = None,
    mariadb_dsn: str | None = None,
    connect: ConnectClient | None = None,
) -> FleetRun:
    """Prepare the fleet (idempotent), run it once over `orders` orders, read back what
    each hop did. Raises SystemExit when a hop does not finish within `timeout_s`.
    `kafka`: a bootstrap address (no security), or who logs in as whom; `specs`: the
    producing services' connector specs (the shipped `connectors/fleet/`); `connect`:
    the Connect REST client (CDCBOX_CONNECT_URL's, without credentials, by default)."""
    if isinstance(kafka, str):
        kafka = FleetKafka(KafkaSettings(kafka))
    result = FleetRun(run=f"demo-{uuid.uuid4().hex[:8]}", orders=orders)
    orders_dsn, inventory_dsn = ORDERS.dsn(admin_dsn), INVENTORY.dsn(admin_dsn)
    prepare(
        admin_dsn,
        connect or ConnectClient(os.environ["CDCBOX_CONNECT_URL"]),
        debezium_password_from_env(),
        specs=specs,
        mariadb_dsn=mariadb_dsn,
    )
    with psycopg.connect(inventory_dsn) as conn, conn.transaction():
        stock_up(conn, SKUS, available=max(1, orders // 10))  # some orders will be short
    schemas = Catalogue.load(resource_dir("schemas") / "avro")
    starts = end_offsets(kafka.operator, ORDER_TOPIC)
    consumers, threads = start_fleet(admin_dsn, kafka, schemas, specs, mariadb_dsn)
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
    _read_back(result, orders_dsn, kafka)
    _replay_to_inventory(result, admin_dsn, kafka, starts, schemas, timeout_s, specs)
    return result


def answers_on_topic(kafka: FleetKafka, run: str) -> list[tuple[str, str]]:
    """(event type, order id) of every answer of the run inventory published, as a
    read_committed reader sees them: what it emitted, whichever outbox it has."""
    return keys_and_types(kafka.operator, ANSWER_TOPIC, run + "-")


def _read_back(result: FleetRun, orders_dsn: str, kafka: FleetKafka) -> None:
    answers = answers_on_topic(kafka, result.run)
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
    kafka: FleetKafka,
    starts: dict[TopicPartition, int],
    schemas: Catalogue,
    timeout_s: float,
    specs: dict[str, ConnectorSpec] | None = None,
) -> None:
    """Every OrderCreated of the run again to inventory: the inbox drops each copy, and
    no answer is emitted twice."""
    rewind(
        kafka.operator,
        INVENTORY.name,
        starts or {TopicPartition(ORDER_TOPIC, p): 0 for p in range(3)},
    )
    replay = service_consumer(INVENTORY, admin_dsn, kafka, schemas, specs)
    thread = threading.Thread(target=replay.run, daemon=True)
    thread.start()
    try:
        until(lambda: replay.stats[Outcome.DUPLICATE] >= result.orders, timeout_s, "the replay")
    finally:
        replay.stop()
        thread.join(timeout=30)
    result.replay = replay.stats
    result.answers_after_replay = len(answers_on_topic(kafka, result.run))
