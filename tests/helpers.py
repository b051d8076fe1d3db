"""Test helpers: wait for a condition with a deadline (never a bare sleep), unique names."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import TypeVar

import psycopg
from psycopg import sql

from cdcbox.limits import EventLimits
from cdcbox.migrate import RelayMode, migrate
from cdcbox.names import DbNames

T = TypeVar("T")


def eventually(
    probe: Callable[[], T], timeout: float = 60.0, interval: float = 0.1, what: str = "condition"
) -> T:
    """Poll `probe` until it returns a truthy value; fail with `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")


def unique(prefix: str) -> str:
    """A name no other test (or earlier run against the same stack) uses."""
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


def migrated_schema(
    dsn: str,
    names: DbNames,
    mode: RelayMode = "polling",
    slot: str | None = None,
    limits: EventLimits = EventLimits(),
) -> DbNames:
    """Create `names.schema` and migrate cdcbox's tables into it; returns `names`."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(names.schema)))
    with psycopg.connect(dsn) as conn:
        migrate(conn, names=names, mode=mode, slot=slot, limits=limits)
    return names


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
