"""What exactly-once on the topic costs: the same CDC pipeline on two Connect worker groups
beside each other on the stack's broker, the stack's own (exactly.once.source.support=
enabled) and one this benchmark starts (disabled), each running a connector of its own
on an outbox of its own schema. The two alternate round by round
(`bench.stats.interleaved`), so a ratio compares runs seconds apart.

Per leg: the sustained rate (a backlog committed ahead of Debezium in 1,000-row
transactions, timed from its first commit until a `read_committed` reader holds all of
it) and, at a fixed offered rate, the relay leg's and the end-to-end percentiles
(`bench.e2e`). The idle group's JVM runs throughout, so both legs share the machine
alike."""

from __future__ import annotations

import dataclasses
import os
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from kafka import KafkaConsumer, TopicPartition

from bench import drain, e2e
from bench.stats import interleaved, ratio_spread, spread
from cdcbox import wire
from cdcbox.cli.common import default_cache_dir, default_state_dir
from cdcbox.connect.client import ConnectClient
from cdcbox.connect.connectors import apply, render
from cdcbox.connect.services import Service
from cdcbox.kafka.client import KafkaSettings
from cdcbox.kafka.topics import ensure_topics
from cdcbox.resources import resource_dir
from cdcbox.stack.config import ExactlyOnce, Ports, StackConfig
from cdcbox.stack.connect_worker import NativeConnect
from cdcbox.stack.jars import resolve_jars

# The benchmark's own worker group, beside the stack's `cdcbox-connect`.
BENCH_GROUP = "cdcbox-bench-connect"
BENCH_CONNECT_PORT = 58093
_PER_TRANSACTION = 1000
# The other transaction boundary Connect offers, measured beside the spec's `poll`.
INTERVAL_BOUNDARY = {"transaction.boundary": "interval", "transaction.boundary.interval.ms": "100"}


@dataclasses.dataclass(frozen=True)
class Leg:
    """One side: the service whose outbox a connector of one Connect group reads."""

    service: Service

    @property
    def schema(self) -> str:
        return self.service.schema


def _bench_worker(exactly_once: ExactlyOnce) -> NativeConnect:
    """A one-worker Connect group of the benchmark's own, on the stack's broker and jars."""
    config = StackConfig(
        state_dir=default_state_dir() / BENCH_GROUP,
        cache_dir=default_cache_dir().resolve(),
        infra_dir=resource_dir("infra"),
        ports=Ports(connect=BENCH_CONNECT_PORT),
        exactly_once=exactly_once,
    )
    bootstrap = os.environ["CDCBOX_BOOTSTRAP_SERVERS"]
    return NativeConnect(config, resolve_jars(config), bootstrap, group=BENCH_GROUP)


@contextmanager
def _leg(
    dsn: str, label: str, connect_url: str, overrides: Mapping[str, str] | None = None
) -> Iterator[Leg]:
    """A schema migrated for CDC and a service connector on it (the shipped spec, with
    `overrides`), registered with the Connect group at `connect_url`; removed with its
    slot afterwards."""
    # A name of its own each run: Connect keeps a deleted connector's offsets.
    schema = f"eos_{label}_{uuid.uuid4().hex[:8]}"
    service = Service(f"bench_{schema}", schema=schema)
    e2e.service_schema(dsn, service, "cdc")
    spec = render(
        resource_dir("connectors") / "outbox-postgres.yaml", {**os.environ, **service.variables()}
    )
    spec = dataclasses.replace(spec, config={**spec.config, **(overrides or {})})
    client = ConnectClient(connect_url)
    try:
        apply(client, spec, progress=lambda line: print(f"bench {label}: {line}"))
        yield Leg(service)
    finally:
        client.delete(spec.name)
        drop_slot_when_released(dsn, service.slot)
        e2e.drop_schema(dsn, service.names)


def drop_slot_when_released(dsn: str, slot: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    with psycopg.connect(dsn, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT active FROM pg_replication_slots WHERE slot_name = %s", (slot,)
            ).fetchone()
            if row is None:
                return
            if not row[0]:
                conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
                return
            time.sleep(0.2)  # until the deleted connector's task lets go of it (deadline)
    raise RuntimeError(f"slot {slot} still active {timeout_s:.0f} s after its connector went")


def committed_records(bootstrap: str, topic: str, expected: int, timeout_s: float) -> float:
    """When (monotonic) a read_committed reader of `topic` from its start has seen
    `expected` records; raises past the deadline."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        isolation_level="read_committed",
        enable_auto_commit=False,
        fetch_max_wait_ms=20,
    )
    try:
        tps = [TopicPartition(topic, p) for p in consumer.partitions_for_topic(topic) or {0}]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        seen, deadline = 0, time.monotonic() + timeout_s
        while seen < expected:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{topic}: {seen} of {expected} records in {timeout_s:.0f} s")
            seen += sum(len(batch) for batch in consumer.poll(timeout_ms=100).values())
        return time.monotonic()
    finally:
        consumer.close()


def sustained_rate(dsn: str, bootstrap: str, leg: Leg, backlog: int) -> dict[str, Any]:
    """Events/s Debezium and Connect publish a backlog at (committed faster than that)."""
    aggregate_type = f"benchsus{uuid.uuid4().hex[:6]}"
    topic = wire.topic_for(aggregate_type)
    ensure_topics(KafkaSettings(bootstrap), [topic])
    started = time.monotonic()
    drain.fill(dsn, leg.service.names, aggregate_type, backlog, per_transaction=_PER_TRANSACTION)
    written = time.monotonic()
    done = committed_records(bootstrap, topic, backlog, timeout_s=600)
    return {
        "backlog": backlog,
        "write_s": written - started,
        "events_per_s": backlog / (done - started),
    }


def at_rate(
    dsn: str, bootstrap: str, pgbench: Path, leg: Leg, rate: float, seconds: float
) -> dict[str, Any]:
    aggregate_type = f"benchrate{uuid.uuid4().hex[:6]}"
    run = e2e.measure(dsn, bootstrap, pgbench, leg.schema, aggregate_type, rate, seconds)
    run.pop("lag_samples_ms")
    return run


def _one_leg(
    dsn: str, bootstrap: str, pgbench: Path, leg: Leg, backlog: int, rate: float, seconds: float
) -> Callable[[], dict[str, Any]]:
    def run() -> dict[str, Any]:
        return {
            "sustained": sustained_rate(dsn, bootstrap, leg, backlog),
            "at_rate": at_rate(dsn, bootstrap, pgbench, leg, rate, seconds),
        }

    return run


def exactly_once_cost(
    dsn: str, bootstrap: str, pgbench: Path, backlog: int, rate: int, seconds: int, rounds: int
) -> dict[str, Any]:
    """Sustained rate and percentiles at `rate`, exactly-once on (a transaction per poll,
    as the spec says, and per 100 ms interval) against off, `rounds` times interleaved."""
    worker = _bench_worker("disabled")
    worker.start()
    try:
        with (
            _leg(dsn, "on", os.environ["CDCBOX_CONNECT_URL"]) as on,
            _leg(dsn, "ivl", os.environ["CDCBOX_CONNECT_URL"], INTERVAL_BOUNDARY) as interval,
            _leg(dsn, "off", worker.url) as off,
        ):
            runs = interleaved(
                {
                    name: _one_leg(dsn, bootstrap, pgbench, leg, backlog, rate, seconds)
                    for name, leg in (("on", on), ("on, interval", interval), ("off", off))
                },
                rounds,
            )
    finally:
        worker.stop()
    return summary(runs, backlog, rate)


def summary(runs: dict[str, list[dict[str, Any]]], backlog: int, rate: int) -> dict[str, Any]:
    """Per side the spread of its sustained rates and its p99s; on / off round by round."""
    flat = {
        side: [
            {
                "sustained_per_s": r["sustained"]["events_per_s"],
                "relay_p99_ms": _p99(r["at_rate"]["relay_leg_ms"]),
                "e2e_p99_ms": _p99(r["at_rate"]["latency_ms"]),
            }
            for r in results
        ]
        for side, results in runs.items()
    }
    reached = all(r["at_rate"]["reached"] for results in runs.values() for r in results)
    return {
        "backlog": backlog,
        "rate": rate,
        "rounds": runs,
        "sides": {
            side: {key: _spread_of(rows, key) for key in rows[0]} for side, rows in flat.items()
        },
        "ratios": {
            f"{what} {side} / off": ratio_spread(flat, side, "off", key)
            for side in ("on", "on, interval")
            for what, key in (("sustained", "sustained_per_s"), ("relay p99", "relay_p99_ms"))
            if reached or key == "sustained_per_s"
        },
    }


def _p99(value: dict[str, float | None] | None) -> float | None:
    return None if value is None else value.get("p99")


def _spread_of(rows: list[dict[str, Any]], key: str) -> dict[str, Any] | None:
    values = [row[key] for row in rows if row[key] is not None]
    return spread(values) if values else None
