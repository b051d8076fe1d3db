"""Producer overhead, measured by pgbench against the stack's PostgreSQL (no Python in the
loop, so the numbers are the database's cost): the same transaction with and without an
outbox append, and against the floor (the same extra row into a uuid-keyed table).

Statements are prepared (`-M prepared`), as psycopg prepares a statement a connection
runs repeatedly, and each transaction is pipelined, as the producer guide recommends. The append
is also measured into a copy of the outbox without its CHECK constraints (migration
0008, which refuse unpublishable rows at write), to show what those cost. The cases run
interleaved, round after round: a ratio is taken within a round, never between two
sequential short runs (on a noisy machine those differ by more than the cost measured)."""

from __future__ import annotations

import re
import subprocess
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import psycopg

from bench.pgbench import ISO, UUID7, pgbench_env
from bench.stats import interleaved, spread
from cdcbox.migrate import migrate
from cdcbox.names import DbNames

SETUP = """
DROP TABLE IF EXISTS bench_business, bench_floor, bench_order, bench_order_line, bench_stock;
CREATE TABLE bench_business (id bigserial PRIMARY KEY, customer text NOT NULL, amount int NOT NULL);
CREATE TABLE bench_floor (id uuid PRIMARY KEY);
CREATE TABLE bench_order (id bigserial PRIMARY KEY, customer text NOT NULL, total int NOT NULL);
CREATE TABLE bench_order_line (order_id bigint NOT NULL, line int NOT NULL, sku int NOT NULL,
    qty int NOT NULL, PRIMARY KEY (order_id, line));
CREATE TABLE bench_stock (sku int PRIMARY KEY, available bigint NOT NULL);
INSERT INTO bench_stock SELECT g, 1000000000 FROM generate_series(1, 1000) g;
"""


# Exactly the statement cdcbox.producer.outbox.Outbox.append sends, with pgbench variables.
def outbox_insert(schema: str) -> str:
    return (
        f"INSERT INTO {schema}.outbox_event (event_id, aggregate_type, aggregate_id, "
        "aggregate_version, event_type, payload, content_type, trace_id, created_at, "
        "occurred_at) SELECT e.*, n.ts, to_char(n.ts, " + ISO + ") FROM (VALUES (" + UUID7 + ", "
        "'benchorder', :aid::text, 1::bigint, 'OrderCreated', "
        "convert_to('{\"order_id\":' || :aid::text || ',\"total\":' || :amt::text || '}', "
        "'UTF8'), 'application/json', '')) AS e, "
        "(SELECT clock_timestamp() AT TIME ZONE 'UTC' AS ts) AS n;"
    )


SCHEMA, UNCHECKED = "bench_producer", "bench_producer_unchecked"
OUTBOX = outbox_insert(SCHEMA)
HEAD = "\\set aid random(1, 1000000)\n\\set amt random(1, 10000)\n\\set sku random(1, 1000)\n"
ONE_ROW = "INSERT INTO bench_business (customer, amount) VALUES ('c' || :aid::text, :amt::int);"
ORDER = (
    "INSERT INTO bench_order (customer, total) VALUES ('c' || :aid::text, :amt::int);\n"
    "INSERT INTO bench_order_line VALUES (currval('bench_order_id_seq'), 1, :sku::int, 1);\n"
    "INSERT INTO bench_order_line VALUES (currval('bench_order_id_seq'), 2, "
    ":sku::int % 997 + 1, 2);\n"
    "INSERT INTO bench_order_line VALUES (currval('bench_order_id_seq'), 3, "
    ":sku::int % 991 + 1, 3);\n"
    "UPDATE bench_stock SET available = available - 1 WHERE sku = :sku::int;"
)


def pipelined(*statements: str) -> str:
    """One transaction, pipelined: the extra statement adds no round trip of its own."""
    return HEAD + "\\startpipeline\nBEGIN;\n" + "\n".join(statements) + "\nCOMMIT;\n\\endpipeline\n"


CASES = {
    "one_row": pipelined(ONE_ROW),
    "one_row+outbox": pipelined(ONE_ROW, OUTBOX),
    "one_row+outbox, no CHECKs": pipelined(ONE_ROW, outbox_insert(UNCHECKED)),
    "one_row+uuid_floor": pipelined(ONE_ROW, f"INSERT INTO bench_floor VALUES ({UUID7});"),
    "order": pipelined(ORDER),
    "order+outbox": pipelined(ORDER, OUTBOX),
    "order+outbox, no CHECKs": pipelined(ORDER, outbox_insert(UNCHECKED)),
    "batch_100_outbox": HEAD
    + "BEGIN;\n"
    + "INSERT INTO "
    + SCHEMA
    + ".outbox_event (event_id, aggregate_type, "
    "aggregate_id, aggregate_version, event_type, payload, content_type, trace_id, created_at, "
    "occurred_at) SELECT " + UUID7 + ", 'benchorder', (:aid::int + g)::text, 1, "
    "'OrderCreated', "
    "convert_to('{\"n\":' || g || '}', 'UTF8'), 'application/json', '', n.ts, to_char(n.ts, "
    + ISO
    + ") FROM generate_series(1, 100) g, (SELECT clock_timestamp() AT TIME ZONE "
    "'UTC' AS ts) n;\nCOMMIT;\n",
}


def outboxes(dsn: str) -> None:
    """Two outboxes of their own, migrated like the real one but outside the connector's
    publication (the measurement is the producer's transaction, not Debezium's backlog);
    the second without the CHECK constraints."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SETUP)
        for schema in (SCHEMA, UNCHECKED):
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
            conn.execute(f"CREATE SCHEMA {schema}")
            with psycopg.connect(dsn) as migrating:
                migrate(migrating, names=DbNames(schema=schema))
        checks = conn.execute(
            "SELECT conname FROM pg_constraint WHERE contype = 'c' AND conrelid = %s::regclass",
            (f"{UNCHECKED}.outbox_event",),
        ).fetchall()
        for (name,) in checks:
            conn.execute(f"ALTER TABLE {UNCHECKED}.outbox_event DROP CONSTRAINT {name}")


def pgbench_tps(
    pgbench: Path, dsn: str, script: Path, clients: int, seconds: int
) -> dict[str, Any]:
    command = [str(pgbench), "-n", "-c", str(clients), "-j", "2", "-T", str(seconds)]
    out = subprocess.run(
        [*command, "-M", "prepared", "-f", str(script)],
        env=pgbench_env(dsn),
        capture_output=True,
        text=True,
        check=True,
    )
    return {"tps": float(re.search(r"tps = ([0-9.]+)", out.stdout).group(1))}  # type: ignore[union-attr]


# Each ratio: (name, function of one round's tps by case).
RATIOS: dict[str, Callable[[dict[str, float]], float]] = {
    "order: outbox cost": lambda r: 1 - r["order+outbox"] / r["order"],
    "order: outbox cost, no CHECKs": lambda r: 1 - r["order+outbox, no CHECKs"] / r["order"],
    "one_row: floor / outbox": lambda r: r["one_row+uuid_floor"] / r["one_row+outbox"],
    "one_row: floor / outbox, no CHECKs": lambda r: (
        r["one_row+uuid_floor"] / r["one_row+outbox, no CHECKs"]
    ),
    "one_row: outbox / bare": lambda r: r["one_row+outbox"] / r["one_row"],
}


def run(dsn: str, pgbench: Path, clients: int, seconds: int, rounds: int) -> dict[str, Any]:
    """Every case for `seconds`, the cases interleaved round by round; each ratio is the
    median of the rounds' ratios, with min and max."""
    outboxes(dsn)
    with tempfile.TemporaryDirectory() as tmp:
        scripts = {name: Path(tmp) / f"case{i}.sql" for i, name in enumerate(CASES)}
        for name, path in scripts.items():
            path.write_text(CASES[name])
        runs = interleaved(
            {
                name: partial(pgbench_tps, pgbench, dsn, path, clients, seconds)
                for name, path in scripts.items()
            },
            rounds,
        )
    with psycopg.connect(dsn, autocommit=True) as conn:
        for schema in (SCHEMA, UNCHECKED):
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
    by_round = [{name: runs[name][i]["tps"] for name in runs} for i in range(rounds)]
    tps = {name: spread([r["tps"] for r in values]) for name, values in runs.items()}
    tps["batch_100_outbox events/s"] = spread([r["batch_100_outbox"] * 100 for r in by_round])
    return {
        "clients": clients,
        "seconds": seconds,
        "rounds": rounds,
        "tps": tps,
        "ratios": {name: spread([f(r) for r in by_round]) for name, f in RATIOS.items()},
    }
