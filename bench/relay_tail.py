"""The polling relay at a steady rate and draining a backlog, against the ceiling of a
bare loop.

The tail: pgbench commits events at a fixed rate, relay workers (LISTEN/NOTIFY) publish
them, and each record's latency is its broker append time (the topic keeps
`message.timestamp.type=LogAppendTime`) minus its `occurred_at` (stamped in the writer's
transaction, before its COMMIT): commit to Kafka, with no consumer poll in it. The same
load is published by as many bare loops woken by NOTIFY
(`bench.bare_relay.bare_listen_relay`): the tail this machine gives any relay. pgbench's
own transaction times are kept beside each: a writer's COMMIT that stalls is in the
tail of both. The drain: rows/s the relay empties a backlog at, ordered and
`--unordered`, and a bare claim-send-mark loop (`bench.bare_relay.bare_relay`) over the
same backlog. Interleaved round by round."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

from kafka import KafkaConsumer, TopicPartition

from bench import drain, loadgen
from bench.bare_relay import bare_relay
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
    dsn: str,
    bootstrap: str,
    pgbench: Path,
    rate: float,
    seconds: float,
    workers: int,
    bare: bool = False,
) -> dict[str, Any]:
    """Commit to broker append of `workers` relay processes (`bare`: bare loops)."""
    names = polling_schema(dsn)
    aggregate_type = f"benchtail{uuid.uuid4().hex[:6]}"
    topic = wire.topic_for(aggregate_type)
    with Admin(KafkaSettings(bootstrap)) as admin:
        admin.create_topics([topic], configs={topic: {"message.timestamp.type": "LogAppendTime"}})
    try:
        with RelayProcesses(
            dsn, bootstrap, names.schema, workers, listen=True, bare=bare
        ) as relays:
            offered = loadgen.offer(
                dsn, pgbench, names.schema, aggregate_type, rate, seconds, log_transactions=True
            )
            latencies = append_latencies_ms(bootstrap, topic, offered.events)
            reports = relays.stop()
        steps: dict[str, list[float]] = {}
        for report in reports:  # the bare loops time their steps (the relay does not)
            for step, samples in report.get("steps_ms", {}).items():
                steps.setdefault(step, []).extend(samples)
        return {
            **offered.as_dict(),
            "published": len(latencies),
            "commit_to_append_ms": percentiles(latencies),
            **({"steps_ms": {s: percentiles(v) for s, v in steps.items()}} if steps else {}),
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
        bare_relay(dsn, bootstrap, names, backlog)
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
            "bare tail": lambda: tail_at_rate(
                dsn, bootstrap, pgbench, rate, seconds, workers, bare=True
            ),
            "drain ordered": lambda: drain.relay_drain(dsn, bootstrap, backlog, backlog, workers),
            "drain unordered": lambda: drain.relay_drain(
                dsn, bootstrap, backlog, backlog, workers, ordered=False
            ),
            "bare loop": lambda: bare_drain(dsn, bootstrap, backlog),
        },
        rounds,
    )

    def quantiles(leg: str, key: str) -> dict[str, Any]:
        return {q: spread([run[key][q] for run in runs[leg]]) for q in ("p50", "p99", "max")}

    return {
        "rate": rate,
        "workers": workers,
        "backlog": backlog,
        "runs": runs,
        "tail_ms": quantiles("tail", "commit_to_append_ms"),
        "bare_tail_ms": quantiles("bare tail", "commit_to_append_ms"),
        # pgbench's transactions while each leg ran: the writer's share of both tails.
        "writer_ms": quantiles("tail", "transaction_ms"),
        "bare_writer_ms": quantiles("bare tail", "transaction_ms"),
        # Where a bare loop's batch spends its time, step by step (the largest of each).
        "bare_steps_max_ms": {
            step: spread([run["steps_ms"][step]["max"] for run in runs["bare tail"]])
            for step in ("claim", "send", "mark")
        },
        "drain_rows_per_s": {
            name: spread([run["rows_per_s"] for run in runs[name]])
            for name in ("drain ordered", "drain unordered", "bare loop")
        },
    }
