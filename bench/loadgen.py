"""The load generator: pgbench writing outbox events at a fixed offered rate.

pgbench (C, several client connections, prepared statements) keeps Python out of the
writing side, so the benchmark measures the pipeline, not its own writers. Each
transaction appends `events_per_tx` events with one multi-row INSERT, exactly the row
`Outbox.append_many` writes (time-ordered event id, ISO `occurred_at`). Versions come
from one sequence and each pgbench client writes aggregates of its own, so versions
increase along every aggregate in commit order, and the consumers' version guard runs
for real without finding stale events. pgbench's `--rate` schedules transactions on a
Poisson clock and reports what it achieved; a run that fell short of the asked rate
says so (`reached`), and callers must not report a latency for a rate not reached.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from bench.pgbench import ISO, UUID7, pgbench_env
from bench.stats import percentiles

# A run reached its rate when pgbench delivered at least this share of it.
REACHED = 0.95


@dataclass(frozen=True)
class Offered:
    asked_per_s: float
    offered_per_s: float  # events/s pgbench achieved
    events: int
    events_per_tx: int
    clients: int
    seconds: float
    # pgbench's own per-transaction execution time (its schedule lag excluded), ms:
    # the writer's INSERT and COMMIT as the client saw them (with `log_transactions`).
    transaction_ms: dict[str, float | None] | None = None

    @property
    def reached(self) -> bool:
        return self.offered_per_s >= REACHED * self.asked_per_s

    def as_dict(self) -> dict[str, Any]:
        return {**asdict(self), "reached": self.reached}


def message_body_sql(aggregate_type: str, aggregate_id: str, version: str) -> str:
    """SQL for the body `cdcbox.producer.messages.message_body` writes for a Bench event
    with payload {"n": g} (`aggregate_id` and `version`: SQL expressions)."""
    return (
        f'convert_to(\'"event_id":"\' || {UUID7} || \'","aggregate_type":'
        f'"{aggregate_type}","aggregate_id":"\' || {aggregate_id} || '
        f'\'","aggregate_version":\' || {version} || \',"event_type":"Bench",'
        '"payload":"{\\"n\\":\' || g || \'}","content_type":'
        '"application/json","trace_id":"","causation_id":""}\', \'UTF8\')'
    )


def script(schema: str, aggregate_type: str, events_per_tx: int, messages: bool = False) -> str:
    """One transaction of `events_per_tx` events: one INSERT into the outbox table, or
    (`messages`) one call of the emitting function, as cdcbox's producer sends them."""
    if messages:
        body = message_body_sql(
            aggregate_type,
            "(:client_id * 100000 + (:aid + g) % 5000)::text",
            f"nextval('{schema}.bench_version')",
        )
        return (
            "\\set aid random(1, 1000000)\n"
            f"SELECT {schema}.outbox_event_emit(array_fill('{aggregate_type}'::text, "
            f"ARRAY[{events_per_tx}]), ARRAY(SELECT {body} "
            f"FROM generate_series(1, {events_per_tx}) g ORDER BY g));\n"
        )
    return (
        "\\set aid random(1, 1000000)\n"
        f"INSERT INTO {schema}.outbox_event (event_id, aggregate_type, aggregate_id, "
        "aggregate_version, event_type, payload, content_type, trace_id, created_at, "
        f"occurred_at) SELECT {UUID7}, '{aggregate_type}', "
        "(:client_id * 100000 + (:aid + g) % 5000)::text, "
        f"nextval('{schema}.bench_version'), 'Bench', "
        "convert_to('{\"n\":' || g || '}', 'UTF8'), 'application/json', '', n.ts, "
        f"to_char(n.ts, {ISO}) FROM generate_series(1, {events_per_tx}) g, "
        "(SELECT clock_timestamp() AT TIME ZONE 'UTC' AS ts) n;\n"
    )


def prepare(dsn: str, schema: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE SEQUENCE IF NOT EXISTS {}.bench_version").format(sql.Identifier(schema))
        )


@contextmanager
def pgbench_command(
    dsn: str,
    pgbench: Path,
    schema: str,
    aggregate_type: str,
    rate: float | None,
    seconds: float,
    events_per_tx: int,
    clients: int,
    transactions: int | None = None,
    log_prefix: Path | None = None,
    messages: bool = False,
) -> Iterator[list[str]]:
    """The pgbench command line (its script exists while the block runs): for `seconds`,
    or for `transactions` in all when given; with `log_prefix`, each transaction logged
    to files named after it."""
    prepare(dsn, schema)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "outbox.sql"
        path.write_text(script(schema, aggregate_type, events_per_tx, messages))
        command = [str(pgbench), "-n", "-c", str(clients), "-j", str(min(clients, 2))]
        if log_prefix is not None:
            command += ["-l", f"--log-prefix={log_prefix}"]
        if transactions is not None:
            command += ["-t", str(max(transactions // clients, 1))]
        else:
            command += ["-T", str(int(seconds))]
        command += ["-M", "prepared", "-f", str(path)]
        if rate is not None:
            command += ["-R", f"{rate / events_per_tx:.3f}"]
        yield command


def offer(
    dsn: str,
    pgbench: Path,
    schema: str,
    aggregate_type: str,
    rate: float | None,
    seconds: float,
    events_per_tx: int = 1,
    clients: int = 4,
    transactions: int | None = None,
    log_transactions: bool = False,
    messages: bool = False,
) -> Offered:
    """Write events at `rate` events/s (None: as fast as pgbench can) for `seconds` (or
    `transactions` in all); with `log_transactions`, the percentiles of pgbench's own
    transaction times too."""
    with tempfile.TemporaryDirectory() as logs:
        prefix = Path(logs) / "tx" if log_transactions else None
        with pgbench_command(
            dsn,
            pgbench,
            schema,
            aggregate_type,
            rate,
            seconds,
            events_per_tx,
            clients,
            transactions,
            prefix,
            messages,
        ) as command:
            started = time.perf_counter()
            out = subprocess.run(
                command, env=pgbench_env(dsn), cwd=logs, capture_output=True, text=True, check=True
            ).stdout
            elapsed = time.perf_counter() - started
        transaction_ms = percentiles(logged_transaction_ms(Path(logs))) if prefix else None
    match = re.search(r"number of transactions actually processed: (\d+)", out)
    assert match is not None, out
    events = int(match.group(1)) * events_per_tx
    return Offered(
        asked_per_s=rate if rate is not None else 0.0,
        offered_per_s=events / elapsed,
        events=events,
        events_per_tx=events_per_tx,
        clients=clients,
        seconds=elapsed,
        transaction_ms=transaction_ms,
    )


def logged_transaction_ms(logs: Path) -> list[float]:
    """Each logged transaction's execution time in ms. A line of pgbench's log is
    `client transaction time script epoch_s epoch_us [schedule_lag]`, in µs; under
    `--rate`, `time` counts from the scheduled start, so the lag is taken out."""
    times: list[float] = []
    for path in logs.glob("tx.*"):
        for line in path.read_text().splitlines():
            fields = line.split()
            lag = int(fields[6]) if len(fields) > 6 else 0
            times.append((int(fields[2]) - lag) / 1000)
    return times
