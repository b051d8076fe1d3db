"""Producer overhead, measured by pgbench against the stack's PostgreSQL (no Python in the
loop, so the numbers are the database's cost): the same transaction with and without an
outbox append, and against the floor (the same extra row into a uuid-keyed table)."""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import psycopg

from cdcbox.migrate import migrate
from cdcbox.names import DbNames
from cdcbox.outbox import ISO_FORMAT

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

# A time-ordered id like the producer's UUIDv7 (PostgreSQL 15 has no uuidv7()): both the
# outbox and the floor use it, so neither pays for random inserts into a large index.
UUID7 = (
    "(lpad(to_hex((extract(epoch FROM clock_timestamp()) * 1000)::bigint), 12, '0') "
    "|| '7' || substr(md5(random()::text), 1, 19))::uuid"
)

# The ISO format without its colons: pgbench would read ":MI" and ":SS" as variables.
ISO = "'" + ISO_FORMAT.replace(":", "' || chr(58) || '") + "'"

# Exactly the statement cdcbox.outbox.Outbox.append sends, with pgbench variables.
OUTBOX = (
    "INSERT INTO bench_producer.outbox_event (event_id, aggregate_type, aggregate_id, "
    "aggregate_version, event_type, payload, content_type, trace_id, created_at, occurred_at) "
    "SELECT e.*, n.ts, to_char(n.ts, " + ISO + ") FROM (VALUES (" + UUID7 + ", "
    "'benchorder', :aid::text, 1::bigint, 'OrderCreated', "
    "convert_to('{\"order_id\":' || :aid::text || ',\"total\":' || :amt::text || '}', 'UTF8'), "
    "'application/json', '')) AS e, (SELECT clock_timestamp() AT TIME ZONE 'UTC' AS ts) AS n;"
)
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
    "one_row+uuid_floor": pipelined(ONE_ROW, f"INSERT INTO bench_floor VALUES ({UUID7});"),
    "order": pipelined(ORDER),
    "order+outbox": pipelined(ORDER, OUTBOX),
    "batch_100_outbox": HEAD
    + "BEGIN;\n"
    + "INSERT INTO bench_producer.outbox_event (event_id, aggregate_type, "
    "aggregate_id, aggregate_version, event_type, payload, content_type, trace_id, created_at, "
    "occurred_at) SELECT " + UUID7 + ", 'benchorder', (:aid::int + g)::text, 1, "
    "'OrderCreated', "
    "convert_to('{\"n\":' || g || '}', 'UTF8'), 'application/json', '', n.ts, to_char(n.ts, "
    + ISO
    + ") FROM generate_series(1, 100) g, (SELECT clock_timestamp() AT TIME ZONE "
    "'UTC' AS ts) n;\nCOMMIT;\n",
}


def run(dsn: str, pgbench: Path, clients: int, seconds: int) -> dict[str, Any]:
    # An outbox of its own, migrated like the real one but outside the connector's
    # publication: the measurement is the producer's transaction, not Debezium's backlog.
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(SETUP)
        conn.execute("DROP SCHEMA IF EXISTS bench_producer CASCADE")
        conn.execute("CREATE SCHEMA bench_producer")
    with psycopg.connect(dsn) as conn:
        migrate(conn, names=DbNames(schema="bench_producer"))
    info = psycopg.conninfo.conninfo_to_dict(dsn)
    env = {
        **os.environ,
        "PGHOST": str(info.get("host", "")),
        "PGPORT": str(info.get("port", "")),
        "PGUSER": str(info.get("user", "")),
        "PGDATABASE": str(info.get("dbname", "")),
    }
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, script in CASES.items():
            path = Path(tmp) / f"{name}.sql"
            path.write_text(script)
            out = subprocess.run(
                [
                    str(pgbench),
                    "-n",
                    "-c",
                    str(clients),
                    "-j",
                    "2",
                    "-T",
                    str(seconds),
                    "-M",
                    "extended",
                    "-f",
                    str(path),
                ],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            tps = float(re.search(r"tps = ([0-9.]+)", out.stdout).group(1))  # type: ignore[union-attr]
            results[name] = {"tps": tps}
    results["batch_100_outbox"]["events_per_s"] = results["batch_100_outbox"]["tps"] * 100
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("DROP SCHEMA bench_producer CASCADE")
    r = {k: v["tps"] for k, v in results.items()}
    ratios = {
        "order: outbox cost": 1 - r["order+outbox"] / r["order"],
        "one_row: floor / outbox": r["one_row+uuid_floor"] / r["one_row+outbox"],
        "one_row: outbox / bare": r["one_row+outbox"] / r["one_row"],
    }
    return {"clients": clients, "seconds": seconds, "tps": results, "ratios": ratios}
