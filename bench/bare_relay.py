"""Relay loops with nothing of cdcbox's in them but its record mapping (psycopg and
kafka-python): the ceilings the polling relay is compared with."""

from __future__ import annotations

import time
from collections.abc import Callable

import psycopg
from kafka import KafkaProducer
from psycopg import sql

from cdcbox import wire
from cdcbox.names import DbNames
from cdcbox.relay.records import to_record
from cdcbox.seam.relay import OutboxRow


def claim_pending(names: DbNames) -> sql.Composed:
    """Lock the oldest PENDING rows, skipping rows another loop holds."""
    return sql.SQL(
        "SELECT id, event_id, aggregate_type, aggregate_id, aggregate_version, "
        "event_type, payload, content_type, trace_id, causation_id, created_at, occurred_at, "
        "retry_count FROM {} WHERE status = 'PENDING' ORDER BY id LIMIT %s "
        "FOR UPDATE SKIP LOCKED"
    ).format(names.table("outbox"))


def bare_relay(dsn: str, bootstrap: str, names: DbNames, count: int, batch: int = 500) -> None:
    """The ceiling of a claim-send-mark loop in Python (psycopg and kafka-python): a
    batch locked with SKIP LOCKED, sent, flushed, marked SENT and committed in one
    transaction; no lease, no order check, no retry bookkeeping, no metrics."""
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, acks="all", linger_ms=5, enable_idempotence=True
    )
    mark = sql.SQL("UPDATE {} SET status = 'SENT', sent_at = now() WHERE id = ANY(%s)").format(
        names.table("outbox")
    )
    sent = 0
    with psycopg.connect(dsn) as conn:
        while sent < count:
            rows = conn.execute(claim_pending(names), (batch,)).fetchall()
            if not rows:
                break
            for row in rows:
                r = to_record(OutboxRow(*row))
                producer.send(r.topic, key=r.key, value=r.value, headers=r.headers)
            producer.flush(timeout=30)
            conn.execute(mark, ([row[0] for row in rows],))
            conn.commit()
            sent += len(rows)
    producer.close()


def bare_listen_relay(
    dsn: str,
    bootstrap: str,
    names: DbNames,
    ready: Callable[[], None],
    stopping: Callable[[], bool],
    batch: int = 500,
) -> tuple[int, dict[str, list[float]]]:
    """`bare_relay` woken by NOTIFY (a poll every 200 ms otherwise), until `stopping()`:
    the tail a claim-send-mark loop has on this machine, with nothing of cdcbox's in it.
    `ready()` is called once its connections and producer are open. Returns the rows
    sent and, per batch that claimed rows, how long each step took in ms: the claim
    (SELECT … FOR UPDATE SKIP LOCKED), the send (every record sent, then flushed: the
    broker's acknowledgements), the mark (UPDATE and COMMIT)."""
    producer = KafkaProducer(
        bootstrap_servers=bootstrap, acks="all", linger_ms=5, enable_idempotence=True
    )
    producer.partitions_for(wire.topic_for("bench"))  # connected before the load starts
    mark = sql.SQL("UPDATE {} SET status = 'SENT', sent_at = now() WHERE id = ANY(%s)").format(
        names.table("outbox")
    )
    sent = 0
    steps: dict[str, list[float]] = {"claim": [], "send": [], "mark": []}
    with psycopg.connect(dsn, autocommit=True) as listener, psycopg.connect(dsn) as conn:
        listener.execute(sql.SQL("LISTEN {}").format(sql.Identifier(names.notify_channel)))
        ready()
        while not stopping():
            started = time.perf_counter()
            rows = conn.execute(claim_pending(names), (batch,)).fetchall()
            claimed = time.perf_counter()
            for row in rows:
                r = to_record(OutboxRow(*row))
                producer.send(r.topic, key=r.key, value=r.value, headers=r.headers)
            producer.flush(timeout=30)
            flushed = time.perf_counter()
            conn.execute(mark, ([row[0] for row in rows],))
            conn.commit()
            if rows:
                steps["claim"].append((claimed - started) * 1000)
                steps["send"].append((flushed - claimed) * 1000)
                steps["mark"].append((time.perf_counter() - flushed) * 1000)
            sent += len(rows)
            if len(rows) < batch:
                for _ in listener.notifies(timeout=0.2, stop_after=1):
                    pass
                for _ in listener.notifies(timeout=0):
                    pass
    producer.close()
    return sent, steps
