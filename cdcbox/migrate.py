"""Versioned, idempotent migrations from schemas/sql, safe when two processes run at once.

All pending files run in one transaction under a transaction-scoped advisory lock: a
second runner waits, then finds nothing left to do. Files under `cdc/` (the Debezium
role with REPLICATION and the publication, which only a superuser or a replication role
may create) are applied only for CDC, and files under `polling/` only for the polling
relay, whose indexes cost every producer transaction: a managed database's ordinary
role can migrate for the polling relay.

The outbox's payload size CHECK is not a file: it follows the `EventLimits` setting, and
`migrate` replaces it whenever the setting changed (NOT VALID, so no table scan).
"""

from __future__ import annotations

import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import psycopg
from psycopg import sql

from cdcbox.errors import SchemaError, UsageError
from cdcbox.limits import PAYLOAD_CONSTRAINT, EventLimits
from cdcbox.names import DbNames
from cdcbox.replication import (
    ensure_publication,
    ensure_slot,
    refuse_table_publication,
    set_password,
)
from cdcbox.resources import resource_dir

# How events leave the database: `cdc` (Debezium reads the outbox table's inserts),
# `polling` (cdcbox's relay claims the table's rows), `messages` (Debezium reads logical
# decoding messages: no outbox rows at all, cdcbox.producer.messages).
RelayMode = Literal["cdc", "polling", "messages"]
RELAY_MODES: tuple[RelayMode, ...] = ("cdc", "polling", "messages")
# The modes Debezium publishes, which read a replication slot.
SLOT_MODES: tuple[RelayMode, ...] = ("cdc", "messages")
# What a database needs: `inbox` for a service that consumes (inbox, versions, parking,
# reconciliation, breaker, group bindings), `outbox` for one that produces (the outbox,
# and for CDC the Debezium role, publication and slot). A consume-only database migrated
# with `inbox` alone needs no REPLICATION, no logical WAL and pins no WAL.
Part = Literal["inbox", "outbox"]
PARTS: tuple[Part, ...] = ("inbox", "outbox")


@dataclass(frozen=True)
class Migration:
    """One versioned SQL file of `schemas/sql`, rendered with a schema's names."""

    version: str
    path: Path

    @property
    def part(self) -> Part:
        """`outbox` for the relays' files and those named for the outbox, else `inbox`."""
        relay_file = "/" in self.version
        return "outbox" if relay_file or "outbox" in self.version else "inbox"

    def render(self, names: DbNames) -> sql.Composed:
        try:
            return sql.SQL(self.path.read_text()).format(**names.template_values())
        except (KeyError, ValueError) as e:
            raise SchemaError(f"migration {self.path} references an unknown name: {e}") from e


def discover(
    mode: RelayMode, root: Path | None = None, parts: tuple[Part, ...] = PARTS
) -> list[Migration]:
    base = root or resource_dir("schemas") / "sql"
    found = [Migration(p.stem, p) for p in sorted(base.glob("*.sql"))]
    found += [Migration(f"{mode}/{p.stem}", p) for p in sorted((base / mode).glob("*.sql"))]
    return [m for m in found if m.part in parts]


def emit_function_sql(names: DbNames, slot: str) -> sql.Composed:
    """(Re)create the messages mode's emitting function, guarded by `slot`."""
    path = resource_dir("schemas") / "sql" / "messages" / "functions" / "emit.sql"
    return sql.SQL(path.read_text()).format(
        **names.template_values(),
        slot_name=sql.Literal(slot),
        message_prefix=sql.Literal(names.message_prefix),
    )


def payload_limit_sql(names: DbNames, limits: EventLimits) -> sql.Composed:
    """Replace the outbox's payload size CHECK with one for `limits` (one statement)."""
    return sql.SQL(
        "ALTER TABLE {table} DROP CONSTRAINT IF EXISTS {name}, "
        "ADD CONSTRAINT {name} CHECK (octet_length(payload) <= {limit}) NOT VALID"
    ).format(
        table=names.table("outbox"),
        name=sql.Identifier(PAYLOAD_CONSTRAINT),
        limit=sql.Literal(limits.max_payload_bytes),
    )


def recorded_payload_limit(conn: psycopg.Connection[Any], names: DbNames) -> int | None:
    """The payload size the outbox table's CHECK allows; None without that CHECK."""
    row = conn.execute(
        "SELECT pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE conrelid = to_regclass(%s) AND conname = %s",
        (f"{names.schema}.{names.outbox}", PAYLOAD_CONSTRAINT),
    ).fetchone()
    found = re.search(r"<= (\d+)", row[0]) if row else None
    return int(found.group(1)) if found else None


def render_sql(
    mode: RelayMode,
    names: DbNames = DbNames(),
    limits: EventLimits = EventLimits(),
    parts: tuple[Part, ...] = PARTS,
    slot: str = "cdcbox_outbox",
) -> str:
    """Every migration for `mode` as one SQL script, for teams that apply DDL with their
    own migration tool (the ledger rows included, so `migrate` later finds them done).
    The messages mode's function names `slot`, which the script does not create."""
    ledger = names.table("migrations")
    script: list[sql.Composable] = [
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (version text PRIMARY KEY, "
            "applied_at timestamptz NOT NULL DEFAULT now());"
        ).format(ledger)
    ]
    for migration in discover(mode, parts=parts):
        script.append(sql.SQL("-- {}").format(sql.SQL(migration.version)))
        script.append(migration.render(names))
        script.append(
            sql.SQL("INSERT INTO {} (version) VALUES ({}) ON CONFLICT DO NOTHING;").format(
                ledger, sql.Literal(migration.version)
            )
        )
    if "outbox" in parts:
        script.append(sql.SQL("-- the payload size limit (cdcbox.limits)"))
        script.append(payload_limit_sql(names, limits) + sql.SQL(";"))
        if mode == "messages":
            script.append(sql.SQL("-- the emitting function, guarded by its slot"))
            script.append(emit_function_sql(names, slot))
    return "\n".join(p.as_string(None) for p in script) + "\n"


def migrate(
    conn: psycopg.Connection[Any],
    names: DbNames = DbNames(),
    mode: RelayMode = "cdc",
    debezium_password: str | None = None,
    slot: str | None = None,
    limits: EventLimits = EventLimits(),
    parts: tuple[Part, ...] = PARTS,
) -> list[str]:
    """Apply what is pending; return the versions applied now (empty when up to date).
    The payload size CHECK is brought in line with `limits` in the same transaction.

    With `slot` (CDC and messages), the connector's replication slot is created right
    after the migrations commit, if it does not exist: from then on every outbox row is
    retained for the connector, however long before its first `cdc-ctl apply` it was
    written. The messages mode requires it: a message emitted before its slot exists is
    lost, so its producer refuses to emit until the slot is there.
    """
    if slot is not None and mode not in SLOT_MODES:
        raise UsageError("a replication slot is for the CDC relay; the polling relay needs none")
    if slot is not None and "outbox" not in parts:
        raise UsageError("a replication slot is for a producing database (--only outbox)")
    if slot is None and mode == "messages" and "outbox" in parts:
        raise UsageError(
            "the messages mode needs its replication slot before the first event (a message "
            "emitted before it exists is lost): name it with --slot, not --no-slot"
        )
    lock_key = zlib.crc32(f"cdcbox-migrate:{names.schema}".encode())
    applied_now: list[str] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (lock_key,))
        ledger = names.table("migrations")
        conn.execute(
            sql.SQL(
                "CREATE TABLE IF NOT EXISTS {} (version text PRIMARY KEY, "
                "applied_at timestamptz NOT NULL DEFAULT now())"
            ).format(ledger)
        )
        done = {row[0] for row in conn.execute(sql.SQL("SELECT version FROM {}").format(ledger))}
        refuse_mode_change(done, mode, names)
        for migration in discover(mode, parts=parts):
            if migration.version in done:
                continue
            conn.execute(migration.render(names))
            conn.execute(
                sql.SQL("INSERT INTO {} (version) VALUES (%s)").format(ledger), (migration.version,)
            )
            applied_now.append(migration.version)
        if "outbox" in parts:
            if recorded_payload_limit(conn, names) != limits.max_payload_bytes:
                conn.execute(payload_limit_sql(names, limits))
            if mode == "cdc":
                ensure_publication(conn, names)
            if mode == "messages" and slot is not None:
                refuse_table_publication(conn, names)
                conn.execute(emit_function_sql(names, slot))
            if debezium_password is not None and mode in SLOT_MODES:
                set_password(conn, names.debezium_role, debezium_password)
    if slot is not None:
        ensure_slot(conn, slot)
    return applied_now


def ensure_schema(conn: psycopg.Connection[Any], names: DbNames) -> bool:
    """Create `names`' schema when the database has none of that name; True when it was
    created now (`db migrate --schema S` says so)."""
    with conn.transaction():
        missing = conn.execute("SELECT to_regnamespace(%s) IS NULL", (names.schema,)).fetchone()
        if missing is None or not missing[0]:
            return False
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(names.schema)))
    return True


def refuse_mode_change(done: set[str], mode: RelayMode, names: DbNames) -> None:
    """`UsageError` when the messages mode is asked of a schema migrated for a table
    relay, or the reverse: its connector would publish the other mode's events twice or
    not at all. Between `cdc` and `polling` the outbox is the same table."""
    recorded = {v.partition("/")[0] for v in done if "/" in v}
    table_modes = recorded & {"cdc", "polling"}
    if mode == "messages" and table_modes:
        other = sorted(table_modes)[0]
    elif mode != "messages" and "messages" in recorded:
        other = "messages"
    else:
        return
    raise UsageError(
        f"schema {names.schema!r} was migrated for --relay {other}, not {mode}: one schema "
        "has one outbox mode; give the other mode's service a schema of its own"
    )


def recorded_relay_mode(conn: psycopg.Connection[Any], names: DbNames = DbNames()) -> RelayMode:
    """The relay the database was migrated for, from the ledger: `messages` once any
    messages migration ran, `polling` once any polling one did, else `cdc`. Raises
    `UsageError` when nothing was migrated."""
    with conn.transaction():
        exists = conn.execute(
            "SELECT to_regclass(%s)", (f"{names.schema}.{names.migrations}",)
        ).fetchone()
        if exists is None or exists[0] is None:
            raise UsageError(
                f"schema {names.schema!r} has no cdcbox migrations: run `cdc-ctl db migrate`"
            )
        modes = conn.execute(
            sql.SQL(
                "SELECT DISTINCT split_part(version, '/', 1) FROM {} WHERE version LIKE '%%/%%'"
            ).format(names.table("migrations"))
        ).fetchall()
    recorded = {m for (m,) in modes}
    return "messages" if "messages" in recorded else "polling" if "polling" in recorded else "cdc"


def notify_trigger_exists(conn: psycopg.Connection[Any], names: DbNames = DbNames()) -> bool:
    """Whether the outbox has the NOTIFY trigger that wakes polling relays at COMMIT
    (polling migration 0002)."""
    with conn.transaction():
        row = conn.execute(
            "SELECT EXISTS (SELECT 1 FROM pg_trigger WHERE tgrelid = to_regclass(%s) "
            "AND tgname = %s)",
            (names.outbox_qualified, f"{names.outbox}_notify"),
        ).fetchone()
    return bool(row and row[0])


# The logical decoding plugin of every slot the migrations create (Debezium's `pgoutput`).
