"""What the pgbench scripts share: SQL for a time-ordered id and the ISO instant, and
the environment that points pgbench at the stack's database."""

from __future__ import annotations

import os

import psycopg

from cdcbox.producer.outbox import ISO_FORMAT

# A time-ordered id like the producer's UUIDv7 (PostgreSQL 15 has no uuidv7()): both the
# outbox and the floor use it, so neither pays for random inserts into a large index.
UUID7 = (
    "(lpad(to_hex((extract(epoch FROM clock_timestamp()) * 1000)::bigint), 12, '0') "
    "|| '7' || substr(md5(random()::text), 1, 19))::uuid"
)

# The ISO format without its colons: pgbench would read ":MI" and ":SS" as variables.
ISO = "'" + ISO_FORMAT.replace(":", "' || chr(58) || '") + "'"


def pgbench_env(dsn: str) -> dict[str, str]:
    info = psycopg.conninfo.conninfo_to_dict(dsn)
    return {
        **os.environ,
        "PGHOST": str(info.get("host", "")),
        "PGPORT": str(info.get("port", "")),
        "PGUSER": str(info.get("user", "")),
        "PGDATABASE": str(info.get("dbname", "")),
    }
