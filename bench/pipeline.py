"""End-to-end and consumer benchmarks on the live stack: consumer cost against bare
kafka-python consumers, CDC and polling-relay latency at fixed offered rates, and the
polling relay's drain rate against the seed's naive one-row-at-a-time relay."""

from __future__ import annotations

import json
import multiprocessing
import signal
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import psycopg
from kafka import KafkaConsumer, KafkaProducer
from psycopg import sql

from cdcbox import wire
from cdcbox.consumer import Consumer, ConsumerConfig, Event, Handler, Outcome
from cdcbox.kafka_client import KafkaSettings
from cdcbox.migrate import migrate
from cdcbox.names import DbNames
from cdcbox.outbox import NewEvent, Outbox
from cdcbox.relay import RelayConfig, RelayWorker
from cdcbox.relay.records import to_record
from cdcbox.relay.store import OutboxRow
from cdcbox.topics import ensure_topics

EFFECT_DDL = "CREATE TABLE IF NOT EXISTS bench_effect (event_id uuid, aggregate_id text, n int)"


def percentiles(samples: list[float]) -> dict[str, float | None]:
    if not samples:
        return {"p50": None, "p95": None, "p99": None, "max": None}
    s = sorted(samples)
    pick = lambda q: s[min(len(s) - 1, int(q * len(s)))]  # noqa: E731
    return {"p50": pick(0.50), "p95": pick(0.95), "p99": pick(0.99), "max": s[-1]}


def effect_handler(name: str, aggregate_type: str) -> Handler:
    class Effect(Handler):
        consumer_name = name
        aggregate_types = (aggregate_type,)
        event_types = frozenset({"Bench"})

        def handle(self, event: Event, conn: psycopg.Connection[Any]) -> None:
            conn.execute(
                "INSERT INTO bench_effect VALUES (%s, %s, %s)",
                (event.event_id, event.aggregate_id, event.payload["n"]),
            )

        def handle_batch(self, events: Sequence[Event], conn: psycopg.Connection[Any]) -> None:
            with conn.cursor() as cur:  # the same statement as the bare consumer's
                cur.executemany(
                    "INSERT INTO bench_effect VALUES (%s, %s, %s)",
                    [(e.event_id, e.aggregate_id, e.payload["n"]) for e in events],
                )

    return Effect()


# --- consumer cost --------------------------------------------------------------------
def prefill(bootstrap: str, topic: str, count: int) -> None:
    ensure_topics(KafkaSettings(bootstrap), [topic])
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, batch_size=262144)
    for i in range(count):
        row = OutboxRow(
            0,
            uuid.uuid4(),
            topic.removeprefix(wire.TOPIC_PREFIX),
            f"a{i % 500}",
            0,
            "Bench",
            json.dumps({"n": i}).encode(),
            wire.CONTENT_TYPE_JSON,
            "",
            __import__("datetime").datetime.utcnow(),
            "2026-01-01T00:00:00.000000Z",
            0,
        )
        r = to_record(row)
        producer.send(topic, key=r.key, value=r.value, headers=r.headers)
    producer.flush()
    producer.close()


def bare_consume(
    bootstrap: str, topic: str, count: int, write: Callable[[list[Any]], None] | None
) -> float:
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=f"bare-{uuid.uuid4()}",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        max_poll_records=500,
    )
    seen, start = 0, time.perf_counter()
    while seen < count:
        for records in consumer.poll(timeout_ms=500).values():
            decoded = [json.loads(r.value) for r in records]
            if write is not None:
                write(decoded)
            seen += len(decoded)
            consumer.commit()
    elapsed = time.perf_counter() - start
    consumer.close(autocommit=False)
    return count / elapsed


def consumer_cost(dsn: str, bootstrap: str, count: int) -> dict[str, Any]:
    topic = wire.topic_for(f"benchcost{uuid.uuid4().hex[:6]}")
    prefill(bootstrap, topic, count)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(EFFECT_DDL)
    writer = psycopg.connect(dsn)

    def business_write(batch: list[Any]) -> None:
        with writer.cursor() as cur:
            cur.executemany(
                "INSERT INTO bench_effect VALUES (NULL, 'bare', %s)", [(d["n"],) for d in batch]
            )
        writer.commit()

    results = {
        "bare_decode": bare_consume(bootstrap, topic, count, None),
        "bare_business_write": bare_consume(bootstrap, topic, count, business_write),
    }
    writer.close()
    per_record: dict[str, float | None] = {}
    for mode in ("per_record", "batch"):
        name = f"bench-{mode}-{uuid.uuid4().hex[:6]}"
        consumer = Consumer(
            [effect_handler(name, topic.removeprefix(wire.TOPIC_PREFIX))],
            ConsumerConfig(
                bootstrap_servers=bootstrap, dsn=dsn, group_id=name, batch_mode=mode == "batch"
            ),
        )
        start = time.perf_counter()
        consumer.run(max_records=count)
        results[f"cdcbox_{mode}"] = count / (time.perf_counter() - start)
        assert consumer.stats[Outcome.PROCESSED] == count
        per_record[f"cdcbox_{mode}"] = percentiles(consumer.stats.handler_ms)["p99"]
    return {
        "records": count,
        "records_per_s": results,
        "p99_ms_per_record": per_record,
        "ratios": {
            "batch / bare business write (d/b)": results["cdcbox_batch"]
            / results["bare_business_write"],
            "bare decode / batch (a/d)": results["bare_decode"] / results["cdcbox_batch"],
            "batch / per record": results["cdcbox_batch"] / results["cdcbox_per_record"],
        },
    }


# --- end to end at offered rates ------------------------------------------------------
def paced_writer(
    dsn: str, outbox: Outbox, aggregate_type: str, rate: float, seconds: float, writers: int = 4
) -> int:
    """Write `rate` events/s (one transaction each) for `seconds`; returns events written."""
    counts = [0] * writers

    def run(index: int) -> None:
        interval = writers / rate
        with psycopg.connect(dsn) as conn:
            next_at = time.perf_counter()
            end = next_at + seconds
            while next_at < end:
                with conn.transaction():
                    outbox.append(
                        conn,
                        NewEvent(
                            aggregate_type,
                            f"a{counts[index] % 97}-{index}",
                            "Bench",
                            {"n": counts[index]},
                        ),
                    )
                counts[index] += 1
                next_at += interval
                pause = next_at - time.perf_counter()
                if pause > 0:
                    time.sleep(pause)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return sum(counts)


def consume_while(
    dsn: str,
    bootstrap: str,
    aggregate_type: str,
    produce: Callable[[], int],
    drain_timeout: float = 60,
) -> dict[str, Any]:
    name = f"bench-e2e-{uuid.uuid4().hex[:6]}"
    consumer = Consumer(
        [effect_handler(name, aggregate_type)],
        ConsumerConfig(bootstrap_servers=bootstrap, dsn=dsn, group_id=name, batch_mode=True),
    )
    thread = threading.Thread(target=consumer.run, daemon=True)
    thread.start()
    formed = time.perf_counter() + 30
    while not consumer.assigned() and time.perf_counter() < formed:
        time.sleep(0.05)  # the clock starts once the group has formed
    start = time.perf_counter()
    written = produce()
    wrote_s = time.perf_counter() - start
    deadline = time.perf_counter() + drain_timeout
    while consumer.stats[Outcome.PROCESSED] < written and time.perf_counter() < deadline:
        time.sleep(0.05)
    done_s = time.perf_counter() - start
    consumer.stop()
    thread.join(timeout=30)
    processed = consumer.stats[Outcome.PROCESSED]
    return {
        "offered_per_s": written / wrote_s,
        "written": written,
        "processed": processed,
        "throughput_per_s": processed / done_s,
        "backlog_after_s": done_s - wrote_s,
        "latency_ms": percentiles(consumer.stats.lag_ms),
        "lag_ms": consumer.stats.lag_ms,
    }


_FORK = multiprocessing.get_context("fork")


def _writer_child(
    queue: Any, dsn: str, schema: str, aggregate_type: str, rate: float, seconds: float
) -> None:
    queue.put(paced_writer(dsn, Outbox(DbNames(schema=schema)), aggregate_type, rate, seconds))


def writer_process(
    dsn: str, schema: str, aggregate_type: str, rate: float, seconds: float
) -> Callable[[], int]:
    """The writers in a process of their own, as a service would be: in the consumer's
    process they would share its GIL, and the benchmark would measure that instead."""

    def produce() -> int:
        queue = _FORK.Queue()
        child = _FORK.Process(
            target=_writer_child, args=(queue, dsn, schema, aggregate_type, rate, seconds)
        )
        child.start()
        written = int(queue.get(timeout=seconds + 120))
        child.join(timeout=30)
        return written

    return produce


def _relay_child(dsn: str, bootstrap: str, schema: str, listen: bool) -> None:
    worker = RelayWorker(
        RelayConfig(dsn=dsn, bootstrap_servers=bootstrap, listen=listen, poll_interval_s=1.0),
        names=DbNames(schema=schema),
    )
    signal.signal(signal.SIGTERM, lambda *_: worker.stop())
    worker.run()


def cdc_at_rate(dsn: str, bootstrap: str, rate: float, seconds: float) -> dict[str, Any]:
    aggregate_type = f"benchcdc{uuid.uuid4().hex[:6]}"
    ensure_topics(KafkaSettings(bootstrap), [wire.topic_for(aggregate_type)])
    return consume_while(
        dsn, bootstrap, aggregate_type, writer_process(dsn, "public", aggregate_type, rate, seconds)
    )


def polling_schema(dsn: str) -> DbNames:
    names = DbNames(schema=f"bench_{uuid.uuid4().hex[:8]}")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(names.schema)))
    with psycopg.connect(dsn) as conn:
        migrate(conn, names=names, mode="polling")
    return names


def polling_at_rate(
    dsn: str, bootstrap: str, rate: float, seconds: float, listen: bool, workers: int = 2
) -> dict[str, Any]:
    """Relay workers as processes of their own (as `cdc-ctl relay run` runs them)."""
    names = polling_schema(dsn)
    aggregate_type = f"benchpoll{uuid.uuid4().hex[:6]}"
    ensure_topics(KafkaSettings(bootstrap), [wire.topic_for(aggregate_type)])
    relays = [
        _FORK.Process(target=_relay_child, args=(dsn, bootstrap, names.schema, listen))
        for _ in range(workers)
    ]
    for r in relays:
        r.start()
    try:
        return consume_while(
            dsn,
            bootstrap,
            aggregate_type,
            writer_process(dsn, names.schema, aggregate_type, rate, seconds),
        )
    finally:
        for r in relays:
            r.terminate()  # SIGTERM to its pid: the worker finishes its batch and returns
        for r in relays:
            r.join(timeout=30)


def drain_rates(dsn: str, bootstrap: str, backlog: int) -> dict[str, Any]:
    """Rows/s the relays empty a backlog at: ours (2 workers) against the naive relay."""
    results = {}
    for kind in ("cdcbox_2_workers", "naive"):
        names = polling_schema(dsn)
        aggregate_type = f"benchdrain{uuid.uuid4().hex[:6]}"
        ensure_topics(KafkaSettings(bootstrap), [wire.topic_for(aggregate_type)])
        with psycopg.connect(dsn) as conn, conn.transaction():
            Outbox(names).append_many(
                conn,
                [
                    NewEvent(aggregate_type, f"a{i % 200}", "Bench", {"n": i})
                    for i in range(backlog)
                ],
            )
        start = time.perf_counter()
        if kind == "naive":
            naive_relay(dsn, bootstrap, names, backlog)
        else:
            relays = [
                RelayWorker(
                    RelayConfig(dsn=dsn, bootstrap_servers=bootstrap, listen=False), names=names
                )
                for _ in range(2)
            ]
            threads = [threading.Thread(target=r.run, kwargs={"until_idle": True}) for r in relays]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        results[kind] = backlog / (time.perf_counter() - start)
    return {
        "backlog": backlog,
        "rows_per_s": results,
        "ratio": results["cdcbox_2_workers"] / results["naive"],
    }


def naive_relay(dsn: str, bootstrap: str, names: DbNames, count: int) -> None:
    """The seed's first relay: one row, one send awaited, one UPDATE, one commit."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    table = names.table("outbox")
    claim = sql.SQL(
        "SELECT id, event_id, aggregate_type, aggregate_id, aggregate_version, "
        "event_type, payload, content_type, trace_id, created_at, occurred_at, "
        "retry_count FROM {} WHERE status = 'PENDING' ORDER BY id LIMIT 1 "
        "FOR UPDATE SKIP LOCKED"
    ).format(table)
    mark = sql.SQL("UPDATE {} SET status = 'SENT', sent_at = now() WHERE id = %s").format(table)
    with psycopg.connect(dsn) as conn:
        for _ in range(count):
            row = conn.execute(claim).fetchone()
            if row is None:
                break
            r = to_record(OutboxRow(*row))
            producer.send(r.topic, key=r.key, value=r.value, headers=r.headers).get(timeout=30)
            conn.execute(mark, (row[0],))
            conn.commit()
    producer.close()


def catch_up(dsn: str, bootstrap: str, rate: float, seconds: float) -> dict[str, Any]:
    """Steady CDC load; the consumer stops for the middle third, then catches up: its drain
    rate as a multiple of the offered rate, and the time until its lag is back to normal."""
    from cdcbox.groups import lag

    aggregate_type = f"benchcatch{uuid.uuid4().hex[:6]}"
    ensure_topics(KafkaSettings(bootstrap), [wire.topic_for(aggregate_type)])
    name = f"bench-catchup-{uuid.uuid4().hex[:6]}"
    produce = writer_process(dsn, "public", aggregate_type, rate, seconds)
    writer = threading.Thread(target=produce)

    def consumer() -> Consumer:
        return Consumer(
            [effect_handler(name, aggregate_type)],
            ConsumerConfig(bootstrap_servers=bootstrap, dsn=dsn, group_id=name, batch_mode=True),
        )

    first = consumer()
    runner = threading.Thread(target=first.run, daemon=True)
    runner.start()
    writer.start()
    time.sleep(seconds / 3)  # steady state (a benchmark's fixed phases, not a wait)
    first.stop()
    runner.join(timeout=30)
    time.sleep(seconds / 3)  # the consumer is down; the backlog grows
    backlog = sum(p.lag for p in lag(KafkaSettings(bootstrap), name))
    second = consumer()
    restarted = time.perf_counter()
    runner = threading.Thread(target=second.run, daemon=True)
    runner.start()
    parity_s = None
    while time.perf_counter() - restarted < seconds * 3:
        time.sleep(0.2)
        if second.stats[Outcome.PROCESSED] >= backlog:
            parity_s = time.perf_counter() - restarted
            break
    drained = second.stats[Outcome.PROCESSED]
    writer.join()
    second.stop()
    runner.join(timeout=30)
    drain_rate = drained / (parity_s or (time.perf_counter() - restarted))
    return {
        "offered_per_s": rate,
        "backlog_at_restart": backlog,
        "time_to_parity_s": parity_s,
        "drain_per_s": drain_rate,
        "drain_vs_steady": drain_rate / rate,
    }
