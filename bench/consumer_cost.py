"""What the consumer costs: cdcbox against bare kafka-python consumers over the same
pre-filled topic, each run in a process of its own (its rate and its peak RSS), the runs
interleaved round by round (`bench.stats.interleaved`): every rate is the median of the
rounds with min and max, every ratio the median of the rounds' ratios.

(a) bare decode: poll, json-decode, commit offsets, and (a') the same with confluent-kafka
(librdkafka) instead of kafka-python: what the second client of issue 55's lever 2 could
save at most on the poll side; (b) bare + the business write: (a)
plus one `executemany` INSERT and COMMIT per poll batch, no inbox; (c) cdcbox, one
transaction per record, with a plain `handle()` and (c') a `pipelined` one; (d) cdcbox
batch mode, one transaction per poll batch, with the plain `handle()` users write and
(d') with a `handle_batch` override doing (b)'s `executemany`. The events carry
aggregate versions, so cdcbox's inbox and version guard both run.
"""

from __future__ import annotations

import datetime
import json
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

import psycopg
from confluent_kafka import Consumer as RdKafkaConsumer
from kafka import KafkaConsumer, KafkaProducer

from bench.handlers import EFFECT_DDL, EFFECT_INSERT, Style, effect_handler
from bench.processes import FORK, peak_rss_mb
from bench.stats import interleaved, percentiles, ratio_spread, spread
from cdcbox import wire
from cdcbox.consumer import Consumer, ConsumerConfig, Outcome
from cdcbox.kafka.client import KafkaSettings
from cdcbox.kafka.topics import ensure_topics
from cdcbox.names import DbNames
from cdcbox.relay.records import to_record
from cdcbox.seam.relay import OutboxRow

AGGREGATES = 500


def prefill(bootstrap: str, topic: str, count: int) -> None:
    """`count` events over 500 aggregates, versions 1, 2, … along each, as the relays
    would publish them."""
    ensure_topics(KafkaSettings(bootstrap), [topic])
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, batch_size=262144)
    now = datetime.datetime.now(datetime.UTC).replace(tzinfo=None)
    for i in range(count):
        row = OutboxRow(
            0,
            uuid.uuid4(),
            topic.removeprefix(wire.TOPIC_PREFIX),
            f"a{i % AGGREGATES}",
            i // AGGREGATES + 1,
            "Bench",
            json.dumps({"n": i}).encode(),
            wire.CONTENT_TYPE_JSON,
            "",  # trace id
            "",  # causation id
            now,
            "2026-01-01T00:00:00.000000Z",
            0,
        )
        r = to_record(row)
        producer.send(topic, key=r.key, value=r.value, headers=r.headers)
    producer.flush()
    producer.close()


def in_child(target: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
    queue = FORK.Queue()

    def main() -> None:
        result = target(*args)
        queue.put({**result, "rss_mb": peak_rss_mb()})

    child = FORK.Process(target=main)
    child.start()
    result: dict[str, Any] = queue.get(timeout=900)
    child.join(timeout=30)
    return result


def _bare(dsn: str, bootstrap: str, topic: str, count: int, write: bool) -> dict[str, Any]:
    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=f"bare-{uuid.uuid4()}",
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        max_poll_records=500,
    )
    writer = psycopg.connect(dsn) if write else None
    seen, start = 0, time.perf_counter()
    while seen < count:
        for records in consumer.poll(timeout_ms=500).values():
            decoded = [json.loads(r.value) for r in records]
            if writer is not None:
                with writer.cursor() as cur:
                    cur.executemany(EFFECT_INSERT, [(None, "bare", d["n"]) for d in decoded])
                writer.commit()
            seen += len(decoded)
            consumer.commit()
    elapsed = time.perf_counter() - start
    consumer.close(autocommit=False)
    if writer is not None:
        writer.close()
    return {"records_per_s": count / elapsed}


def _bare_confluent(dsn: str, bootstrap: str, topic: str, count: int) -> dict[str, Any]:
    """(a') with confluent-kafka: batches of up to 500 as kafka-python's `poll` gives,
    each decoded and then its offsets committed synchronously."""
    consumer = RdKafkaConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"bare-{uuid.uuid4()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    consumer.subscribe([topic])
    seen, start = 0, time.perf_counter()
    while seen < count:
        messages = consumer.consume(num_messages=500, timeout=0.5)
        decoded = [json.loads(m.value() or b"") for m in messages if m.error() is None]
        if decoded:
            seen += len(decoded)
            consumer.commit(asynchronous=False)
    elapsed = time.perf_counter() - start
    consumer.close()
    return {"records_per_s": count / elapsed}


def cdcbox_run(
    dsn: str,
    bootstrap: str,
    topic: str,
    count: int,
    batch: bool,
    style: Style,
    names: DbNames = DbNames(),
) -> dict[str, Any]:
    """One cdcbox consumer (a fresh consumer name) over `count` records of `topic`, with
    its inbox in `names`' schema."""
    name = f"bench-{'batch' if batch else 'record'}-{style}-{uuid.uuid4().hex[:6]}"
    consumer = Consumer(
        [effect_handler(name, topic.removeprefix(wire.TOPIC_PREFIX), style)],
        ConsumerConfig(bootstrap_servers=bootstrap, dsn=dsn, group_id=name, batch_mode=batch),
        names,
    )
    start = time.perf_counter()
    consumer.run(max_records=count)
    elapsed = time.perf_counter() - start
    if consumer.stats[Outcome.PROCESSED] != count:
        raise RuntimeError(f"{name} processed {consumer.stats[Outcome.PROCESSED]} of {count}")
    return {
        "records_per_s": count / elapsed,
        "record_ms": percentiles(consumer.stats.handler_ms),
    }


# Each ratio: (name, numerator run, denominator run).
RATIOS = (
    ("per_record / bare_business_write", "cdcbox_per_record", "bare_business_write"),
    (
        "per_record_pipelined / bare_business_write",
        "cdcbox_per_record_pipelined",
        "bare_business_write",
    ),
    ("batch / bare_business_write", "cdcbox_batch", "bare_business_write"),
    (
        "batch_handle_batch / bare_business_write",
        "cdcbox_batch_handle_batch",
        "bare_business_write",
    ),
    ("batch / per_record", "cdcbox_batch", "cdcbox_per_record"),
    ("bare_decode_confluent / bare_decode", "bare_decode_confluent", "bare_decode"),
)


def consumer_cost(dsn: str, bootstrap: str, count: int, rounds: int) -> dict[str, Any]:
    """Every run reads the same `count` pre-filled records (a fresh group, and for cdcbox a
    fresh consumer name, so its inbox holds none of them), `rounds` times interleaved."""
    topic = wire.topic_for(f"benchcost{uuid.uuid4().hex[:6]}")
    prefill(bootstrap, topic, count)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(EFFECT_DDL)

    def child(target: Callable[..., dict[str, Any]], *args: Any) -> Callable[[], dict[str, Any]]:
        return lambda: in_child(target, dsn, bootstrap, topic, count, *args)

    runs = interleaved(
        {
            "bare_decode": child(_bare, False),
            "bare_decode_confluent": child(_bare_confluent),
            "bare_business_write": child(_bare, True),
            "cdcbox_per_record": child(cdcbox_run, False, "plain"),
            "cdcbox_per_record_pipelined": child(cdcbox_run, False, "pipelined"),
            "cdcbox_batch": child(cdcbox_run, True, "plain"),
            "cdcbox_batch_handle_batch": child(cdcbox_run, True, "handle_batch"),
        },
        rounds,
    )
    return {
        "records": count,
        "rounds": rounds,
        "records_per_s": {k: spread([r["records_per_s"] for r in v]) for k, v in runs.items()},
        "rss_mb": {k: max(r["rss_mb"] for r in v) for k, v in runs.items()},
        # Per record: from the start of the transaction that applied it to its COMMIT
        # (in batch mode, its batch's transaction: no record commits before the batch);
        # each percentile the median of the rounds'.
        "record_ms": {
            k: {q: statistics.median(r["record_ms"][q] for r in v) for q in ("p50", "p99")}
            for k, v in runs.items()
            if "record_ms" in v[0]
        },
        "ratios": {name: ratio_spread(runs, a, b, "records_per_s") for name, a, b in RATIOS},
    }
