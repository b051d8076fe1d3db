"""What one record costs in per-record mode, statement by statement: the consumer's
steps (its router, the one statement of inbox claim + version guard, the effect handler)
called one at a time over records fetched from Kafka, so each can be timed on the client
(a statement's time is its round trip plus the server's work), on a session configured as
the consumer's is (`synchronous_commit` off, one barrier per poll batch). Every rate the
page cites comes from a `Consumer` run through its public entry points instead. The
COMMIT is also timed as PostgreSQL's default makes it, waiting for its WAL flush, to show
what the barrier saves."""

from __future__ import annotations

import time
import uuid
from collections import defaultdict
from typing import Any

import psycopg
from kafka import KafkaConsumer

from bench.consumer_cost import prefill
from bench.handlers import EFFECT_DDL, effect_handler
from cdcbox import wire
from cdcbox.consumer import ConsumerConfig
from cdcbox.consumer.steps.route import Decoded, Routed, Router
from cdcbox.db import Reconnecting, durability_barrier
from cdcbox.postgres.database import postgres_stores

BATCH = 500  # records per poll batch, as the consumer's max_poll_records


def _records(bootstrap: str, topic: str, count: int) -> list[Any]:
    consumer = KafkaConsumer(
        topic, bootstrap_servers=bootstrap, auto_offset_reset="earliest", group_id=None
    )
    records: list[Any] = []
    started = time.perf_counter()
    while len(records) < count and time.perf_counter() - started < 120:
        for batch in consumer.poll(timeout_ms=500).values():
            records.extend(batch)
    consumer.close()
    return records[:count]


def record_cost(dsn: str, bootstrap: str, count: int) -> dict[str, Any]:
    aggregate_type = f"benchstep{uuid.uuid4().hex[:6]}"
    topic = wire.topic_for(aggregate_type)
    prefill(bootstrap, topic, count)
    records = _records(bootstrap, topic, count)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(EFFECT_DDL)
    handler = effect_handler(f"bench-steps-{uuid.uuid4().hex[:6]}", aggregate_type)
    stores = postgres_stores()
    config = ConsumerConfig(bootstrap_servers=bootstrap, dsn=dsn, group_id="unused")
    router = Router({"Bench": (handler,)}, config.schemas, config.unhandled)
    seconds: dict[str, float] = defaultdict(float)
    source = Reconnecting(dsn, synchronous_commit=False)
    conn = source()
    for index, record in enumerate(records):
        t0 = time.perf_counter()
        decoded = router.decode(record)
        assert isinstance(decoded, Decoded)
        (routed,) = router.route(decoded)  # type: ignore[misc]
        t1 = time.perf_counter()
        assert isinstance(routed, Routed)
        conn.execute("BEGIN")
        t2 = time.perf_counter()
        claim, _ = stores.claim_and_advance.run(conn, routed.event, handler.consumer_name)
        t3 = time.perf_counter()
        handler.handle(routed.event, conn)
        t4 = time.perf_counter()
        conn.execute("COMMIT")
        t5 = time.perf_counter()
        assert claim == "new"
        seconds["decode + route (Python)"] += t1 - t0
        seconds["BEGIN"] += t2 - t1
        seconds["inbox claim + version guard (one statement)"] += t3 - t2
        seconds["the handler's INSERT"] += t4 - t3
        seconds["COMMIT (synchronous_commit off)"] += t5 - t4
        if (index + 1) % BATCH == 0:
            t6 = time.perf_counter()
            durability_barrier(conn)
            seconds["durability barrier, per poll batch"] += time.perf_counter() - t6
    source.close()
    with psycopg.connect(dsn, autocommit=True) as sync:  # the same COMMIT, flushed
        sync.execute("CREATE TABLE IF NOT EXISTS bench_flushed (n int)")
        flushed = min(count, 2000)
        for n in range(flushed):
            sync.execute("BEGIN")
            sync.execute("INSERT INTO bench_flushed VALUES (%s)", (n,))
            t = time.perf_counter()
            sync.execute("COMMIT")
            seconds["_flushed_commit"] += time.perf_counter() - t
        sync.execute("DROP TABLE bench_flushed")
    micros = {k: v / len(records) * 1e6 for k, v in seconds.items() if not k.startswith("_")}
    return {
        "records": len(records),
        "us_per_record": micros,
        "us_total": sum(micros.values()),
        "us_commit_waiting_for_flush": seconds["_flushed_commit"] / flushed * 1e6,
    }
