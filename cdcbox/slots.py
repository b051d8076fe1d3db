"""Replication slot health: a slot that stops advancing pins WAL until the disk fills.

`retained_bytes` is how much WAL the slot holds back (current LSN - restart_lsn);
dropping is allowed only for an inactive slot, since dropping an active one would cut a
running connector off from changes it has not read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

from cdcbox.errors import UsageError


@dataclass(frozen=True)
class SlotStatus:
    name: str
    plugin: str | None
    slot_type: str
    active: bool
    restart_lsn: str | None
    confirmed_flush_lsn: str | None
    retained_bytes: int
    wal_status: str | None


def slot_status(conn: psycopg.Connection[Any]) -> list[SlotStatus]:
    with conn.transaction():
        rows = conn.execute(
            "SELECT slot_name, plugin, slot_type, active, restart_lsn::text, "
            "confirmed_flush_lsn::text, "
            "coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn), 0)::bigint, "
            "wal_status FROM pg_replication_slots ORDER BY slot_name"
        ).fetchall()
    return [SlotStatus(*r) for r in rows]


def drop_slot(conn: psycopg.Connection[Any], name: str) -> None:
    """Drop an inactive slot; refuse an active or unknown one, naming which."""
    with conn.transaction():
        row = conn.execute(
            "SELECT active FROM pg_replication_slots WHERE slot_name = %s", (name,)
        ).fetchone()
        if row is None:
            raise UsageError(f"no replication slot named {name!r} (see `cdc-ctl slot status`)")
        if row[0]:
            raise UsageError(
                f"slot {name!r} is active: stop its connector first "
                "(`cdc-ctl connectors stop NAME`), then drop it"
            )
        conn.execute("SELECT pg_drop_replication_slot(%s)", (name,))
