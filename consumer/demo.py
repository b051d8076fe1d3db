"""The demo: orders written with their OrderCreated events in one transaction, applied by
the five downstream services through Debezium and Kafka, then replayed to show that a
redelivery changes nothing. Prints a summary. Run by scripts/demo against a live stack."""

from __future__ import annotations

import argparse
import os
import random
import threading
import time
import uuid
from typing import Any

import psycopg
from kafka import KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata

from cdcbox import wire
from cdcbox.avro import Catalogue
from cdcbox.consumer import Consumer, ConsumerConfig, Handler, Outcome
from cdcbox.producer.outbox import Outbox
from cdcbox.resources import resource_dir
from consumer.inventory import InventoryHandler
from consumer.marketing import CouponHandler
from consumer.notifications import NotificationHandler
from consumer.orders import OrderLine, create_schema, place_order
from consumer.points import PointsHandler
from consumer.search_index import SearchIndexHandler

SERVICES: list[type[Handler]] = [
    InventoryHandler,
    CouponHandler,
    PointsHandler,
    NotificationHandler,
    SearchIndexHandler,
]
TOPIC = wire.topic_for("order")


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
                    OrderLine(f"sku-{sku}", rng.randint(1, 3), rng.randrange(100, 5000))
                    for sku in rng.sample(range(50), 3)
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


def end_offsets(bootstrap: str) -> dict[TopicPartition, int]:
    probe = KafkaConsumer(bootstrap_servers=bootstrap, group_id=None)
    try:
        partitions = [TopicPartition(TOPIC, p) for p in probe.partitions_for_topic(TOPIC) or ()]
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


def run_until(consumer: Consumer, done: Any, timeout_s: float) -> None:
    thread = threading.Thread(target=consumer.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout_s
    while not done() and time.monotonic() < deadline:
        time.sleep(0.1)
    consumer.stop()
    thread.join(timeout=30)
    if not done():
        raise SystemExit(f"demo: not everything arrived within {timeout_s:.0f}s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--orders", type=int, default=1000)
    parser.add_argument("--writers", type=int, default=4)
    parser.add_argument(
        "--rate",
        type=float,
        default=100,
        help="Orders/s, steady (0: a burst as fast as the writers go; then the drain "
        "time is reported, not a steady-state latency).",
    )
    parser.add_argument("--timeout", type=float, default=180)
    args = parser.parse_args()
    dsn, bootstrap = os.environ["CDCBOX_DSN"], os.environ["CDCBOX_BOOTSTRAP_SERVERS"]
    run = f"demo-{uuid.uuid4().hex[:8]}"
    schemas = Catalogue.load(resource_dir("schemas") / "avro")
    with psycopg.connect(dsn) as conn:
        create_schema(conn)
    starts = end_offsets(bootstrap)

    consumers = {
        cls.consumer_name: Consumer(
            [cls()],
            ConsumerConfig(
                bootstrap_servers=bootstrap,
                dsn=dsn,
                group_id=cls.consumer_name,
                schemas=schemas,
                batch_mode=True,
            ),
        )
        for cls in SERVICES
    }
    threads = [threading.Thread(target=c.run, daemon=True) for c in consumers.values()]
    for t in threads:
        t.start()
    assigned_by = time.monotonic() + 60
    while not all(c.assigned() for c in consumers.values()) and time.monotonic() < assigned_by:
        time.sleep(0.05)  # the clock starts once every service has its partitions
    began = time.monotonic()
    write_orders(dsn, run, args.orders, args.writers, schemas, args.rate)
    wrote_s = time.monotonic() - began

    def all_delivered() -> bool:
        return all(
            c.stats[Outcome.PROCESSED] + c.stats[Outcome.SKIPPED] >= args.orders
            for c in consumers.values()
        )

    deadline = time.monotonic() + args.timeout
    while not all_delivered() and time.monotonic() < deadline:
        time.sleep(0.1)
    for c in consumers.values():
        c.stop()
    for t in threads:
        t.join(timeout=30)
    if not all_delivered():
        raise SystemExit(f"demo: not every order arrived within {args.timeout:.0f}s")
    delivered_s = time.monotonic() - began

    # Redeliver everything to the inventory service: the inbox turns it into no-ops.
    inventory = InventoryHandler.consumer_name
    rewind(bootstrap, inventory, starts or {TopicPartition(TOPIC, p): 0 for p in range(3)})
    replay = Consumer(
        [InventoryHandler()],
        ConsumerConfig(bootstrap_servers=bootstrap, dsn=dsn, group_id=inventory, schemas=schemas),
    )
    run_until(replay, lambda: replay.stats[Outcome.DUPLICATE] >= args.orders, args.timeout)

    with psycopg.connect(dsn) as conn:
        reserved = conn.execute(
            "SELECT count(DISTINCT order_id) FROM inventory_reservation WHERE order_id LIKE %s",
            (run + "-%",),
        ).fetchone()
    stats = consumers[inventory].stats
    print(
        f"run {run}: {args.orders} orders (OrderCreated as Avro) written by {args.writers} "
        f"writers in {wrote_s:.1f}s ({args.orders / wrote_s:.0f} orders/s"
        + (f", {args.rate:.0f}/s asked)" if args.rate else ", a burst)")
    )
    for name, c in consumers.items():
        print(
            f"  {name:<20} processed={c.stats[Outcome.PROCESSED]:<6} "
            f"skipped={c.stats[Outcome.SKIPPED]:<5} dead-lettered={c.stats[Outcome.DEAD_LETTERED]}"
        )
    print(f"events delivered: {stats[Outcome.PROCESSED]} to each service in {delivered_s:.1f}s")
    if args.rate:
        print(
            f"steady-state latency (commit → handler committed): "
            f"p50 {stats.lag_percentile(50):.0f} ms, p99 {stats.lag_percentile(99):.0f} ms"
        )
    else:
        print(
            f"burst: applied by every service {delivered_s - wrote_s:.1f}s after the writers "
            "stopped (a queue draining, not the pipeline's latency: use --rate for that)"
        )
    print(
        f"replay to inventory: duplicates skipped={replay.stats[Outcome.DUPLICATE]}, "
        f"applied again={replay.stats[Outcome.PROCESSED]}; orders with reservations: "
        f"{reserved[0] if reserved else 0} (exactly once)"
    )


if __name__ == "__main__":
    main()
