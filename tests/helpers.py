"""Test helpers: unique names, schemas of their own, slots dropped once released; waiting
for a condition with a deadline is the plugin's `eventually` (never a bare sleep)."""

from __future__ import annotations

import uuid

import psycopg
from psycopg import sql

from cdcbox.names import DbNames
from cdcbox.testing.schemas import migrated_schema
from cdcbox.testing.waits import eventually

__all__ = [
    "drop_slot_once_released",
    "eventually",
    "migrated_schema",
    "schema_with_orders",
    "unique",
]


def unique(prefix: str) -> str:
    """A name no other test (or earlier run against the same stack) uses."""
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


def drop_slot_once_released(dsn: str, slot: str, timeout: float = 60.0) -> None:
    """Drop replication slot `slot` (if it exists) once no walsender holds it.

    A connector's task can still be starting while the connector is deleted, so the slot
    may show inactive and be taken again a moment later; the drop is retried until it
    succeeds rather than trusting one `active = false` reading."""
    with psycopg.connect(dsn, autocommit=True) as conn:

        def dropped() -> bool:
            try:
                conn.execute(
                    "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                    "WHERE slot_name = %s",
                    (slot,),
                )
            except psycopg.errors.ObjectInUse:
                return False
            return True

        eventually(dropped, timeout=timeout, interval=0.2, what=f"slot {slot} dropped")


def schema_with_orders(dsn: str, prefix: str) -> DbNames:
    """A migrated schema of its own (CDC mode, no slot) with a business table `orders`."""
    names = migrated_schema(dsn, DbNames(schema=unique(prefix)), mode="cdc")
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE TABLE {}.orders (id text PRIMARY KEY)").format(
                sql.Identifier(names.schema)
            )
        )
    return names
