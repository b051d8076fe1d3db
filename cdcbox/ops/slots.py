"""Replication slots: created before the first event, watched, dropped only when nothing
is lost.

A slot that stops advancing pins WAL until the disk fills: `retained_bytes` is how much
it holds back (current LSN - restart_lsn). Dropping a slot throws away every change it
has not confirmed, and a connector whose slot is gone can only start over at the current
position, so `drop_slot` refuses a slot that is active, claimed by a connector, or still
holds outbox inserts nobody has published, unless forced.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

from cdcbox.errors import UsageError
from cdcbox.names import DbNames

# The prefix of the messages the connector's heartbeat.action.query writes (the specs
# of connectors/): they only move the slot, and are no one's events.
HEARTBEAT_PREFIX = b"cdcbox-heartbeat"


@dataclass(frozen=True)
class SlotStatus:
    """One replication slot as `pg_replication_slots` shows it, with the WAL it retains."""

    name: str
    plugin: str | None
    slot_type: str
    active: bool
    restart_lsn: str | None
    confirmed_flush_lsn: str | None
    retained_bytes: int
    wal_status: str | None
    database: str | None = None  # the database a logical slot streams (None: physical)
    # WAL written after the confirmed position: what the slot's client has still to
    # confirm (0 for a slot that confirmed nothing yet).
    unconfirmed_bytes: int = 0


def slot_status(conn: psycopg.Connection[Any]) -> list[SlotStatus]:
    with conn.transaction():
        rows = conn.execute(
            "SELECT slot_name, plugin, slot_type, active, restart_lsn::text, "
            "confirmed_flush_lsn::text, "
            "coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn), 0)::bigint, "
            "wal_status, database, "
            "coalesce(pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn), 0)::bigint "
            "FROM pg_replication_slots ORDER BY slot_name"
        ).fetchall()
    return [SlotStatus(*r) for r in rows]


def unpublished_inserts(conn: psycopg.Connection[Any], name: str, publication: str) -> int:
    """Events the slot holds past its confirmed position: what dropping it loses.

    Peeks (does not consume) the slot's changes through the publication: inserts into
    the published outbox table, and transactional logical decoding messages of any
    prefix but the connector's heartbeat (the outbox without a table, whose events
    exist nowhere else). The slot must be inactive.
    """
    with conn.transaction():
        row = conn.execute(
            "SELECT count(*) FROM pg_logical_slot_peek_binary_changes("
            "%s, NULL, NULL, 'proto_version', '1', 'publication_names', %s, "
            "'messages', 'true') "
            # An insert ('I'), or a message ('M', flags, LSN, then its prefix at byte 10)
            # that is transactional (flags 1) and not a heartbeat.
            "WHERE get_byte(data, 0) = ascii('I') OR (get_byte(data, 0) = ascii('M') "
            "AND get_byte(data, 1) = 1 AND substring(data FROM 11 FOR %s) <> %s)",
            (name, publication, len(HEARTBEAT_PREFIX) + 1, HEARTBEAT_PREFIX + b"\x00"),
        ).fetchone()
    assert row is not None
    return int(row[0])


@dataclass(frozen=True)
class DropPlan:
    """What dropping slot `name` would lose: the connectors streaming from it and the
    outbox inserts it holds that no connector has published yet."""

    name: str
    claimed_by: tuple[str, ...]
    unpublished: int

    @property
    def loses_something(self) -> bool:
        return bool(self.claimed_by or self.unpublished)

    def describe(self) -> str:
        reasons = []
        if self.claimed_by:
            reasons.append(f"connector {', '.join(self.claimed_by)} streams from it")
        if self.unpublished:
            reasons.append(f"it holds {self.unpublished} unpublished outbox events")
        return " and ".join(reasons) or "nothing uses it"


def plan_drop(
    conn: psycopg.Connection[Any], name: str, claimed_by: list[str], names: DbNames = DbNames()
) -> DropPlan:
    """Inspect slot `name` before a drop; an unknown or active slot is refused here."""
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
    pending = unpublished_inserts(conn, name, names.publication)
    return DropPlan(name, tuple(sorted(claimed_by)), pending)


def drop_slot(conn: psycopg.Connection[Any], plan: DropPlan, force: bool = False) -> None:
    """Drop the slot `plan` inspected. Without `force`, refuses when the drop loses
    something (a connector's position, unpublished events)."""
    if plan.loses_something and not force:
        raise UsageError(
            f"slot {plan.name!r} is still needed: {plan.describe()}; dropping it would lose "
            "what it has not published (pass --force to drop anyway)"
        )
    with conn.transaction():
        conn.execute("SELECT pg_drop_replication_slot(%s)", (plan.name,))
