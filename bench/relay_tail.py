"""The polling relay at a steady rate and draining a backlog, against the ceiling of a
bare loop.

The tail: pgbench commits events at a fixed rate, relay workers (LISTEN/NOTIFY) publish
them, and each record's latency is its broker append time (the topic keeps
`message.timestamp.type=LogAppendTime`) minus its `occurred_at` (stamped in the writer's
transaction): commit to Kafka, with no consumer poll in it. The drain: rows/s the relay
empties a backlog at, ordered and `--unordered`, and a bare claim-send-mark loop
(`bench.drain.bare_relay`) over the same backlog. Interleaved round by round."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

from kafka import KafkaConsumer, TopicPartition

from bench import drain, loadgen
from bench.e2e import drop_schema, polling_schema
from bench.processes import RelayProcesses
from bench.stats import interleaved, percentiles, spread
from cdcbox import wire
from cdcbox.event import decode
from cdcbox.kafka.client import Admin, KafkaSettings


def append_latencies_ms(bootstrap: str, topic: str, expected: int) -> list[float]:
    """Per record of `topic`: broker append time minus `occurred_at`, in ms."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, isolation_level="read_committed"
    )
    try:
        tps = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or {0}]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        latencies: list[float] = []
        deadline = time.monotonic() + 120
        while len(latencies) < expected and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=200).values():
                for record in records:
                    occurred = decode(record).occurred_at
                    if occurred is not None:
                        latencies.append(record.timestamp - occurred.timestamp() * 1000)
        return latencies
    finally:
        consumer.close()


def tail_at_rate(
    dsn: str, bootstrap: str, pgbench: Path, rate: float, seconds: float, workers: int
) -> dict[str, Any]:
    names = polling_schema(dsn)
    aggregate_type = f"benchtail{uuid.uuid4().hex[:6]}"
    topic = wire.topic_for(aggregate_type)
    with Admin(KafkaSettings(bootstrap)) as admin:
        admin.create_topics([topic], configs={topic: {"message.timestamp.type": "LogAppendTime"}})
    try:
        with RelayProcesses(dsn, bootstrap, names.schema, workers, listen=True) as relays:
            offered = loadgen.offer(dsn, pgbench, names.schema, aggregate_type, rate, seconds)
            latencies = append_latencies_ms(bootstrap, topic, offered.events)
            relays.stop()
        return {
            **offered.as_dict(),
            "published": len(latencies),
            "commit_to_append_ms": percentiles(latencies),
        }
    finally:
        drop_schema(dsn, names)


def bare_drain(dsn: str, bootstrap: str, backlog: int) -> dict[str, Any]:
    names = polling_schema(dsn)
    aggregate_type = f"benchbare{uuid.uuid4().hex[:6]}"
    topic = wire.topic_for(aggregate_type)
    with Admin(KafkaSettings(bootstrap)) as admin:
        admin.create_topics([topic])
    try:
        drain.fill(dsn, names, aggregate_type, backlog)
        started = time.perf_counter()
        drain.bare_relay(dsn, bootstrap, names, backlog)
        return {"backlog": backlog, "rows_per_s": backlog / (time.perf_counter() - started)}
    finally:
        drop_schema(dsn, names)


def relay_tail(
    dsn: str,
    bootstrap: str,
    pgbench: Path,
    rate: float,
    seconds: float,
    backlog: int,
    rounds: int,
    workers: int = 2,
) -> dict[str, Any]:
    """The tail at `rate`, the drains of `backlog` rows, `rounds` times interleaved."""
    runs = interleaved(
        {
            "tail": lambda: tail_at_rate(dsn, bootstrap, pgbench, rate, seconds, workers),
            "drain ordered": lambda: drain.relay_drain(dsn, bootstrap, backlog, backlog, workers),
            "drain unordered": lambda: drain.relay_drain(
                dsn, bootstrap, backlog, backlog, workers, ordered=False
            ),
            "bare loop": lambda: bare_drain(dsn, bootstrap, backlog),
        },
        rounds,
    )
    tails = [run["commit_to_append_ms"] for run in runs["tail"]]
    return {
        "rate": rate,
        "workers": workers,
        "backlog": backlog,
        "runs": runs,
        "tail_ms": {q: spread([t[q] for t in tails]) for q in ("p50", "p99", "max")},
        "drain_rows_per_s": {
            name: spread([run["rows_per_s"] for run in runs[name]])
            for name in ("drain ordered", "drain unordered", "bare loop")
        },
    }
