"""A schema of its own for one test: cdcbox's tables migrated into it."""

from __future__ import annotations

import psycopg
from psycopg import sql

from cdcbox.limits import EventLimits
from cdcbox.migrate import RelayMode, migrate
from cdcbox.names import DbNames


def migrated_schema(
    dsn: str,
    names: DbNames,
    mode: RelayMode = "polling",
    slot: str | None = None,
    limits: EventLimits = EventLimits(),
    debezium_password: str | None = None,
) -> DbNames:
    """Create `names.schema` and migrate cdcbox's tables into it; returns `names`.
    `debezium_password`: set on `names.debezium_role` (a service's own role needs it
    before its connector can log in)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(names.schema)))
    with psycopg.connect(dsn) as conn:
        migrate(
            conn,
            names=names,
            mode=mode,
            slot=slot,
            limits=limits,
            debezium_password=debezium_password,
        )
    return names
