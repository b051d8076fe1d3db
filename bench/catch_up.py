"""Catch-up: a steady CDC load; the consumer stops, a burst of backlog is committed
behind it, and once Debezium has published all of it the consumer restarts. Reported:
the backlog at restart, the time until the consumer has applied all of it (parity),
its drain rate, and that rate as a multiple of the steady rate."""

from __future__ import annotations

import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
from kafka import KafkaConsumer, TopicPartition

from bench import loadgen
from bench.pgbench import pgbench_env
from bench.processes import ConsumerProcess
from cdcbox import wire
from cdcbox.kafka.client import KafkaSettings
from cdcbox.kafka.topics import ensure_topics
from cdcbox.ops.groups import lag


def _topic_size(bootstrap: str, topic: str) -> int:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap)
    try:
        tps = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or {0}]
        return sum(consumer.end_offsets(tps).values())
    finally:
        consumer.close()


def _committed(dsn: str, aggregate_type: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM outbox_event WHERE aggregate_type = %s", (aggregate_type,)
        ).fetchone()
    assert row is not None
    return int(row[0])


def catch_up(
    dsn: str, bootstrap: str, pgbench: Path, rate: float, steady_s: float, backlog: int
) -> dict[str, Any]:
    aggregate_type = f"benchcatch{uuid.uuid4().hex[:6]}"
    topic = wire.topic_for(aggregate_type)
    ensure_topics(KafkaSettings(bootstrap), [topic])
    first = ConsumerProcess(dsn, bootstrap, aggregate_type).start()
    group = first.group
    with loadgen.pgbench_command(
        dsn, pgbench, "public", aggregate_type, rate, 3600, 1, 2
    ) as steady_command:
        steady = subprocess.Popen(
            steady_command,
            env=pgbench_env(dsn),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            time.sleep(steady_s)  # the steady phase (a benchmark's fixed phase, not a wait)
            first.finish(0, timeout_s=30)  # stop it now
            stopped = time.monotonic()
            burst = loadgen.offer(
                dsn, pgbench, "public", aggregate_type, None, 0, 100, 2, backlog // 100
            )
            written = _committed(dsn, aggregate_type)
            deadline = time.monotonic() + 600
            while _topic_size(bootstrap, topic) < written and time.monotonic() < deadline:
                time.sleep(0.2)  # until Debezium has published the backlog (deadline)
            published_s = time.monotonic() - stopped
            waiting = sum(p.lag for p in lag(KafkaSettings(bootstrap), group) if p.lag)
            second = ConsumerProcess(dsn, bootstrap, aggregate_type, group=group)
            restarted = time.monotonic()
            second.start()
            result = second.finish(waiting, timeout_s=600)
        finally:
            steady.terminate()  # by its pid
            steady.wait(timeout=30)
    parity_at = next((t for t, n in result["progress"] if n >= waiting), None)
    parity_s = None if parity_at is None else parity_at - restarted
    drain = waiting / parity_s if parity_s else None
    return {
        "steady_per_s": rate,
        "burst_events": burst.events,
        "burst_offered_per_s": burst.offered_per_s,
        "debezium_published_backlog_s": published_s,
        "backlog_at_restart": waiting,
        "time_to_parity_s": parity_s,
        "drain_per_s": drain,
        "drain_vs_steady": None if drain is None else drain / rate,
        "consumer_rss_mb": result["rss_mb"],
    }
