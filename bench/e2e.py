"""End to end at fixed offered rates: pgbench commits outbox events, a relay publishes
them (Debezium through Kafka Connect, or the polling relay's workers), a cdcbox batch
consumer in its own process applies them.

Two legs are timed per event: relay (`occurred_at` → the record reaches a bare Kafka
consumer) and end to end (`occurred_at` → the cdcbox handler's transaction committed).
A rate pgbench did not reach gets no latency: only what was offered is reported.
"""

from __future__ import annotations

import os
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from bench import cores, loadgen
from bench.handlers import Style
from bench.processes import ConsumerProcess, KafkaProbe, RelayProcesses, machine_busy_s
from bench.stats import percentiles
from cdcbox import wire
from cdcbox.connect.services import Service
from cdcbox.kafka.client import KafkaSettings
from cdcbox.kafka.topics import ensure_topics
from cdcbox.migrate import RelayMode, migrate
from cdcbox.names import DbNames
from cdcbox.stack.secrets import read_password_properties

# The top CDC rate again, (name, handler style, consumer processes of the group): how
# much of the ceiling is the handler's statement per record, and how much one process's
# serial loop (poll, apply, commit: waiting on PostgreSQL between its Python).
TOP_RATE_VARIANTS: tuple[tuple[str, Style, int], ...] = (
    ("cdc_handle_batch", "handle_batch", 1),
    ("cdc_two_consumers", "plain", 2),
    ("cdc_handle_batch_two_consumers", "handle_batch", 2),
)


def events_per_tx(rate: float) -> int:
    """One event per transaction up to 2,000/s, as a service writes; above that, ten
    (a busy service's multi-event transactions), so pgbench's clients keep up."""
    return 1 if rate <= 2000 else 10


def measure(
    dsn: str,
    bootstrap: str,
    pgbench: Path,
    schema: str,
    aggregate_type: str,
    rate: float,
    seconds: float,
    messages: bool = False,
    style: Style = "plain",
    consumers: int = 1,
) -> dict[str, Any]:
    """`rate` events/s for `seconds` into `schema`'s outbox (`messages`: the outbox
    without a table), through to `consumers` cdcbox consumer processes of one group whose
    handler is written in `style`."""
    topic = wire.topic_for(aggregate_type)
    ensure_topics(KafkaSettings(bootstrap), [topic])
    consumer = ConsumerProcess(
        dsn, bootstrap, aggregate_type, style=style, processes=consumers
    ).start()
    with KafkaProbe(bootstrap, topic) as probe:
        started, busy_before = time.monotonic(), machine_busy_s()
        by_role_before = cores.snapshot(consumer.pids)
        offered = loadgen.offer(
            dsn,
            pgbench,
            schema,
            aggregate_type,
            rate,
            seconds,
            events_per_tx(rate),
            messages=messages,
        )
        wrote, busy = time.monotonic(), machine_busy_s() - busy_before
        by_role = cores.cores_between(
            by_role_before, cores.snapshot(consumer.pids), wrote - started
        )
        result = consumer.finish(offered.events, timeout_s=120)
    applied_at = next((t for t, n in result["progress"] if n >= offered.events), None)
    reached = offered.reached and result["ended"] >= offered.events
    return {
        **offered.as_dict(),
        "processed": result["processed"],
        "ended_otherwise": result["ended"] - result["processed"],
        "delivered_per_s": result["processed"] / ((applied_at or time.monotonic()) - started),
        # After the writers stopped: how long the rest took to apply (no growing backlog:
        # a fraction of a second).
        "drain_after_writes_s": None if applied_at is None else max(applied_at - wrote, 0.0),
        "relay_leg_ms": percentiles(probe.lag_ms) if reached else None,
        "latency_ms": percentiles(result["lag_ms"]) if reached else None,
        "consumer_rss_mb": result["rss_mb"],
        # The machine's busy cores while pgbench wrote; the consumer's cores from then
        # until it finished, and where its poll cycles went (records a cycle:
        # processed / cycles).
        "cores_busy": busy / (wrote - started),
        # Which process held them (`bench.cores`): where a rate's ceiling is.
        "cores_by_role": by_role,
        "consumer_cores": result["cpu_s"] / (time.monotonic() - started),
        "consumer_cycle": result["cycle"],
        "lag_samples_ms": result["lag_ms"] if reached else [],
    }


def cdc_at_rate(
    dsn: str,
    bootstrap: str,
    pgbench: Path,
    rate: float,
    seconds: float,
    style: Style = "plain",
    consumers: int = 1,
) -> dict[str, Any]:
    aggregate_type = f"benchcdc{uuid.uuid4().hex[:6]}"
    return measure(
        dsn,
        bootstrap,
        pgbench,
        "public",
        aggregate_type,
        rate,
        seconds,
        style=style,
        consumers=consumers,
    )


def own_schema(dsn: str, prefix: str, mode: RelayMode, slot: str | None = None) -> DbNames:
    """cdcbox's tables migrated into a schema of their own (`drop_schema` removes it);
    the messages mode needs its `slot`."""
    names = DbNames(schema=f"{prefix}_{uuid.uuid4().hex[:8]}")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(names.schema)))
    with psycopg.connect(dsn) as conn:
        migrate(conn, names=names, mode=mode, slot=slot)
    return names


def service_schema(dsn: str, service: Service, mode: RelayMode, slot: str | None = None) -> DbNames:
    """`service`'s schema made and migrated as `db migrate --service` does: its own
    Debezium role, with the password the worker reads (`stack env`'s file)."""
    password_file = os.environ.get("CDCBOX_DEBEZIUM_PASSWORD_FILE")
    password = read_password_properties(Path(password_file)) if password_file else None
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(service.schema)))
    with psycopg.connect(dsn) as conn:
        migrate(conn, names=service.names, mode=mode, slot=slot, debezium_password=password)
    return service.names


def polling_schema(dsn: str) -> DbNames:
    return own_schema(dsn, "bench", "polling")


def drop_schema(dsn: str, names: DbNames) -> None:
    """The schema and its publication (which would outlive it, empty)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(names.schema)))
        conn.execute(
            sql.SQL("DROP PUBLICATION IF EXISTS {}").format(sql.Identifier(names.publication))
        )


def polling_at_rate(
    dsn: str,
    bootstrap: str,
    pgbench: Path,
    rate: float,
    seconds: float,
    listen: bool,
    workers: int = 2,
) -> dict[str, Any]:
    """`workers` relay processes (LISTEN/NOTIFY on or off) instead of Debezium."""
    names = polling_schema(dsn)
    aggregate_type = f"benchpoll{uuid.uuid4().hex[:6]}"
    try:
        with RelayProcesses(dsn, bootstrap, names.schema, workers, listen) as relays:
            run = measure(dsn, bootstrap, pgbench, names.schema, aggregate_type, rate, seconds)
            reports = relays.stop()
            run["relay_rss_mb"] = max(r["rss_mb"] for r in reports)
            run["relay_cpu_s"] = sum(r["cpu_s"] for r in reports)
        return run
    finally:
        drop_schema(dsn, names)
