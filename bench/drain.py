"""The polling relay's drain rate: rows/s its workers empty a backlog at, with a small
backlog and with a large one (the claim must not sort the backlog: the rate with a
million rows waiting should match the rate with a few thousand), against the seed's
naive relay (one row, one awaited send, one UPDATE, one commit)."""

from __future__ import annotations

import time
import uuid
from typing import Any

import psycopg
from kafka import KafkaProducer
from psycopg import sql

from bench.bare_relay import claim_pending
from bench.e2e import drop_schema, polling_schema
from bench.pgbench import ISO, UUID7
from bench.processes import RelayProcesses
from cdcbox import wire
from cdcbox.kafka.client import KafkaSettings
from cdcbox.kafka.topics import ensure_topics
from cdcbox.names import DbNames
from cdcbox.relay.records import to_record
from cdcbox.seam.relay import OutboxRow


def fill(
    dsn: str, names: DbNames, aggregate_type: str, rows: int, per_transaction: int | None = None
) -> None:
    """`rows` PENDING events over 2,000 aggregates, written server-side, in transactions
    of `per_transaction` rows (None: one)."""
    insert = sql.SQL(
        "INSERT INTO {} (event_id, aggregate_type, aggregate_id, aggregate_version, "
        "event_type, payload, content_type, trace_id, created_at, occurred_at) "
        "SELECT " + UUID7 + ", %s, (g %% 2000)::text, g / 2000 + 1, 'Bench', "
        "convert_to('{{\"n\":' || g || '}}', 'UTF8'), 'application/json', '', n.ts, "
        "to_char(n.ts, " + ISO.replace("{", "{{").replace("}", "}}") + ") "
        "FROM generate_series(%s::int, %s::int) g, "
        "(SELECT clock_timestamp() AT TIME ZONE 'UTC' AS ts) n"
    ).format(names.table("outbox"))
    step = per_transaction or rows
    with psycopg.connect(dsn) as conn:
        for first in range(1, rows + 1, step):
            conn.execute(insert, (aggregate_type, first, min(first + step - 1, rows)))
            conn.commit()
        conn.execute(sql.SQL("ANALYZE {}").format(names.table("outbox")))


def sent_count(conn: psycopg.Connection[Any], names: DbNames) -> int:
    row = conn.execute(
        sql.SQL("SELECT count(*) FROM {} WHERE status = 'SENT'").format(names.table("outbox"))
    ).fetchone()
    assert row is not None
    return int(row[0])


def relay_drain(
    dsn: str, bootstrap: str, backlog: int, measured: int, workers: int = 2, ordered: bool = True
) -> dict[str, Any]:
    """Rows/s of `workers` relay processes over the first `measured` rows of `backlog`
    (`ordered` False: `relay run --unordered`)."""
    names = polling_schema(dsn)
    aggregate_type = f"benchdrain{uuid.uuid4().hex[:6]}"
    ensure_topics(KafkaSettings(bootstrap), [wire.topic_for(aggregate_type)])
    try:
        fill(dsn, names, aggregate_type, backlog)
        with psycopg.connect(dsn, autocommit=True) as conn:
            # From before the workers start (their start-up counted): they drain from the
            # moment each is ready, not all at once.
            start = time.perf_counter()
            with RelayProcesses(
                dsn, bootstrap, names.schema, workers, listen=False, ordered=ordered
            ) as relays:
                sent, deadline = 0, start + 600
                while sent < measured and time.perf_counter() < deadline:
                    time.sleep(0.1)  # a benchmark's sampling interval, not a wait
                    sent = sent_count(conn, names)
                elapsed = time.perf_counter() - start
                rss = max(r["rss_mb"] for r in relays.stop())
        return {
            "backlog": backlog,
            "measured_rows": sent,
            "rows_per_s": sent / elapsed,
            "relay_rss_mb": rss,
        }
    finally:
        drop_schema(dsn, names)


def naive_drain(dsn: str, bootstrap: str, rows: int) -> dict[str, Any]:
    names = polling_schema(dsn)
    aggregate_type = f"benchnaive{uuid.uuid4().hex[:6]}"
    ensure_topics(KafkaSettings(bootstrap), [wire.topic_for(aggregate_type)])
    try:
        fill(dsn, names, aggregate_type, rows)
        start = time.perf_counter()
        naive_relay(dsn, bootstrap, names, rows)
        return {"backlog": rows, "rows_per_s": rows / (time.perf_counter() - start)}
    finally:
        drop_schema(dsn, names)


def naive_relay(dsn: str, bootstrap: str, names: DbNames, count: int) -> None:
    """The seed's first relay: one row, one send awaited, one UPDATE, one commit."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all")
    mark = sql.SQL("UPDATE {} SET status = 'SENT', sent_at = now() WHERE id = %s").format(
        names.table("outbox")
    )
    with psycopg.connect(dsn) as conn:
        for _ in range(count):
            row = conn.execute(claim_pending(names), (1,)).fetchone()
            if row is None:
                break
            r = to_record(OutboxRow(*row))
            producer.send(r.topic, key=r.key, value=r.value, headers=r.headers).get(timeout=30)
            conn.execute(mark, (row[0],))
            conn.commit()
    producer.close()


def drain_rates(
    dsn: str, bootstrap: str, small: int, large: int, large_measured: int, naive_rows: int
) -> dict[str, Any]:
    small_run = relay_drain(dsn, bootstrap, small, small)
    large_run = relay_drain(dsn, bootstrap, large, large_measured)
    naive = naive_drain(dsn, bootstrap, naive_rows)
    return {
        "small": small_run,
        "large": large_run,
        "naive": naive,
        "ratios": {
            "large / small": large_run["rows_per_s"] / small_run["rows_per_s"],
            "cdcbox / naive": small_run["rows_per_s"] / naive["rows_per_s"],
        },
    }
