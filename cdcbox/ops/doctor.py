"""Preflight checks: everything a deployment needs before the first event, each with the
fix when it fails. Every check runs even if others fail; an unreachable service is a
failed check, not a crash."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import psycopg

from cdcbox.connect.client import ConnectClient
from cdcbox.connect.connectors import ConnectorSpec
from cdcbox.errors import CdcboxError, UsageError
from cdcbox.kafka.client import KafkaSettings
from cdcbox.kafka.security import KafkaSecurity
from cdcbox.limits import EventLimits
from cdcbox.migrate import notify_trigger_exists, recorded_relay_mode
from cdcbox.names import DbNames
from cdcbox.ops.check import Check
from cdcbox.ops.cluster_checks import connect_checks, kafka_checks
from cdcbox.ops.limit_checks import connector_limit_check, table_limit_check, topic_limit_checks
from cdcbox.ops.message_checks import (
    messages_outbox_check,
    reads_messages,
    refuse_unpublishable_messages,
)
from cdcbox.ops.role_checks import debezium_role_check, service_role_check
from cdcbox.ops.slots import slot_status
from cdcbox.ops.stall_checks import progress_check, transaction_checks
from cdcbox.replication import publication_covers


@dataclass(frozen=True)
class DoctorInputs:
    """What `doctor` checks: each source it was given (None: not checked) and the spec."""

    conn: psycopg.Connection[Any] | None
    connect: ConnectClient | None
    bootstrap_servers: str | None
    kafka_security: KafkaSecurity
    spec: ConnectorSpec
    names: DbNames
    expected_debezium: str
    max_retained_bytes: int
    limits: EventLimits = EventLimits()
    # A transaction open longer than this fails `open transactions`; a RUNNING task's
    # slot standing still this long with WAL after it fails `connector progress` (0:
    # not watched).
    max_transaction_age_s: float = 60.0
    stuck_after_s: float = 20.0
    # The service's own database role (`db migrate --grant-to`), checked when given.
    service_role: str | None = None


def _column_types(conn: psycopg.Connection[Any], names: DbNames) -> dict[str, str]:
    rows = conn.execute(
        "SELECT column_name, data_type FROM information_schema.columns "
        "WHERE table_schema = %s AND table_name = %s",
        (names.schema, names.outbox),
    ).fetchall()
    return {c: t for c, t in rows}


def database_checks(
    conn: psycopg.Connection[Any], spec: ConnectorSpec, names: DbNames, max_retained_bytes: int
) -> list[Check]:
    """What PostgreSQL must offer the connector: logical WAL, a free slot and sender, the
    role, the publication, the outbox columns the router maps, a slot that advances."""
    config = spec.config
    slot = config.get("slot.name", "")
    messages = reads_messages(config)
    with conn.transaction():
        role = config.get("database.user", names.debezium_role)
        return [
            _wal_level(conn),
            *_replication_capacity(conn, slot),
            debezium_role_check(conn, role, names, needs_select=not messages),
            messages_outbox_check(conn, config, names)
            if messages
            else _publication(conn, config, names),
            _slot_database(conn, slot),
            *([] if messages else [_outbox_columns(conn, config, names)]),
            _slot_retention(conn, slot, max_retained_bytes),
        ]


def relay_wakeup_check(conn: psycopg.Connection[Any], names: DbNames) -> Check:
    """How a polling relay of this outbox is woken: not at all on a CDC database (its
    connector publishes, and `relay run` refuses), at COMMIT by the NOTIFY trigger, or
    only by its poll when the trigger is missing."""
    recorded = recorded_relay_mode(conn, names)
    if recorded != "polling":
        return Check(
            "relay wake-up",
            True,
            f"{names.outbox_qualified}: migrated for {recorded}, the connector publishes "
            "(`relay run` refuses this database)",
        )
    woken = notify_trigger_exists(conn, names)
    return Check(
        "relay wake-up",
        woken,
        f"{names.outbox_qualified}: NOTIFY trigger, relays wake at COMMIT"
        if woken
        else f"{names.outbox_qualified}: no NOTIFY trigger, relays with --listen refuse",
        "`cdc-ctl db migrate --relay polling` restores it; `relay run --no-listen` polls "
        "on purpose",
    )


def _wal_level(conn: psycopg.Connection[Any]) -> Check:
    wal_level = conn.execute("SHOW wal_level").fetchone()
    return Check(
        "wal_level",
        wal_level == ("logical",),
        f"wal_level={wal_level[0] if wal_level else '?'}",
        "set wal_level = logical in postgresql.conf and restart",
    )


def _replication_capacity(conn: psycopg.Connection[Any], slot: str) -> list[Check]:
    slots = conn.execute(
        "SELECT current_setting('max_replication_slots')::int, count(*) FROM pg_replication_slots"
    ).fetchone()
    senders = conn.execute(
        "SELECT current_setting('max_wal_senders')::int, count(*) FROM pg_stat_replication"
    ).fetchone()
    assert slots is not None
    assert senders is not None
    slot_exists = any(s.name == slot for s in slot_status(conn))
    return [
        Check(
            "replication slots",
            slots[0] - slots[1] > 0 or slot_exists,
            f"{slots[1]} of {slots[0]} used",
            "raise max_replication_slots, or drop unused slots (`cdc-ctl slot drop NAME`)",
        ),
        Check(
            "wal senders",
            senders[0] - senders[1] > 0,
            f"{senders[1]} of {senders[0]} used",
            "raise max_wal_senders",
        ),
    ]


def _publication(conn: psycopg.Connection[Any], config: dict[str, str], names: DbNames) -> Check:
    publication = config.get("publication.name", names.publication)
    tables = [
        f"{s}.{t}"
        for s, t in conn.execute(
            "SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = %s",
            (publication,),
        )
    ]
    wanted = config.get("table.include.list", names.outbox_qualified)
    return Check(
        "publication",
        tables == [wanted],
        f"{publication} covers {tables or 'nothing'}",
        f"the publication must cover exactly {wanted}: `cdc-ctl db migrate` creates it",
    )


def _slot_database(conn: psycopg.Connection[Any], slot: str) -> Check:
    row = conn.execute(
        "SELECT database, current_database() FROM pg_replication_slots WHERE slot_name = %s",
        (slot,),
    ).fetchone()
    if row is None:
        return Check(
            "connector slot",
            False,
            f"{slot} does not exist",
            "`cdc-ctl db migrate --slot NAME` creates it (the connector would create it at its "
            "first start, and rows written before that are never published)",
        )
    return Check(
        "connector slot",
        row[0] == row[1],
        f"{slot} belongs to database {row[0]}",
        f"a slot streams one database: give the connector of {row[1]} a slot of its own",
    )


def refuse_unpublishable(
    conn: psycopg.Connection[Any], config: Mapping[str, str], names: DbNames
) -> list[str]:
    """Before a connector is applied: raise `UsageError` if it would report RUNNING and
    publish nothing of its table (the table outside its publication, its slot another
    database's). Returns warnings: a slot that does not exist yet, or a connector of
    another database than `conn`'s, which cannot be checked from here."""
    with conn.transaction():
        row = conn.execute("SELECT current_database()").fetchone()
        database = row[0] if row else None
        wanted = config.get("database.dbname")
        if wanted and wanted != database:
            return [
                f"not checked against the database: the DSN names {database}, the "
                f"connector {wanted}"
            ]
        table = config.get("table.include.list", names.outbox_qualified)
        publication = config.get("publication.name", names.publication)
        if reads_messages(config):
            refuse_unpublishable_messages(conn, config, names)
        elif not publication_covers(conn, publication, table):
            raise UsageError(
                f"publication {publication!r} does not cover {table}: the connector would "
                "run and publish none of its rows (`cdc-ctl --schema SCHEMA db migrate` "
                "makes the schema's publication; set CDCBOX_PUBLICATION to it)"
            )
        slot = _slot_database(conn, config.get("slot.name", ""))
    if slot.ok:
        return []
    if "does not exist" in slot.detail:
        return [f"{slot.detail}: {slot.fix}"]
    raise UsageError(f"slot {slot.detail}: {slot.fix}")


def _outbox_columns(conn: psycopg.Connection[Any], config: dict[str, str], names: DbNames) -> Check:
    types = _column_types(conn, names)
    mapped = {
        k.rsplit(".", 1)[-1]: v
        for k, v in config.items()
        if k.startswith("transforms.") and ".table.field.event." in k
    }
    problems = [f"missing column {c}" for c in sorted(mapped.values()) if c not in types]
    timestamp_col = mapped.get("timestamp")
    ts_type = types.get(timestamp_col or "", "")
    if timestamp_col and ts_type and ts_type != "timestamp without time zone":
        problems.append(
            f"{timestamp_col} is {ts_type}, the router needs timestamp (without time zone)"
        )
    return Check(
        "outbox columns",
        not problems and bool(types),
        "; ".join(problems) or f"{len(types)} columns match the spec",
        "align the outbox table with the connector spec's table.field.event.* mapping",
    )


def _slot_retention(conn: psycopg.Connection[Any], slot: str, max_retained_bytes: int) -> Check:
    retained = [s for s in slot_status(conn) if s.name == slot]
    held = retained[0].retained_bytes if retained else 0
    return Check(
        "slot retained WAL",
        held <= max_retained_bytes,
        f"{slot}: {held} bytes retained" if retained else f"{slot}: not created yet",
        "the connector is not consuming: `cdc-ctl connectors status NAME`, then restart or "
        "resume it (do not drop this slot: it is the connector's, and holds its unpublished "
        "events)",
    )


def run_checks(inputs: DoctorInputs, topics: list[str]) -> list[Check]:
    checks: list[Check] = [connector_limit_check(inputs.spec, inputs.limits)]

    def guarded(name: str, fn: Callable[[], list[Check]], fix: str) -> None:
        try:
            checks.extend(fn())
        except (CdcboxError, psycopg.Error) as e:
            checks.append(Check(name, False, str(e).splitlines()[0], fix))

    if inputs.conn is not None:
        conn = inputs.conn
        guarded(
            "database",
            lambda: database_checks(conn, inputs.spec, inputs.names, inputs.max_retained_bytes),
            "check --dsn / CDCBOX_DSN",
        )
        guarded(
            "outbox payload limit",
            lambda: [table_limit_check(conn, inputs.names, inputs.limits)],
            "check --dsn / CDCBOX_DSN",
        )
        guarded(
            "relay wake-up",
            lambda: [relay_wakeup_check(conn, inputs.names)],
            "check --dsn / CDCBOX_DSN",
        )
        if inputs.service_role:
            role = inputs.service_role
            guarded(
                "service role",
                lambda: [service_role_check(conn, inputs.names, role)],
                "check --dsn / CDCBOX_DSN",
            )
    if inputs.connect is not None:
        client = inputs.connect
        guarded(
            "kafka connect",
            lambda: connect_checks(client, inputs.expected_debezium, inputs.spec),
            "check --connect-url / CDCBOX_CONNECT_URL",
        )
        if inputs.conn is not None and inputs.stuck_after_s > 0:
            conn = inputs.conn
            guarded(
                "connector progress",
                lambda: [progress_check(conn, client, inputs.spec, inputs.stuck_after_s)],
                "check --dsn and --connect-url",
            )
    if inputs.bootstrap_servers:
        kafka = KafkaSettings(inputs.bootstrap_servers, security=inputs.kafka_security)
        guarded(
            "kafka",
            lambda: (
                kafka_checks(kafka, topics)
                + topic_limit_checks(kafka, topics, inputs.limits)
                + transaction_checks(kafka, inputs.max_transaction_age_s)
            ),
            "check --bootstrap-servers / CDCBOX_BOOTSTRAP_SERVERS",
        )
    return checks
