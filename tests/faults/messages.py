"""The outbox without a table under faults: a schema migrated for it with its slot, its
connector on the stack's Connect, and a business table whose rows are the truth of what
committed (no outbox rows exist to read back)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql

from cdcbox.connect.client import ConnectClient
from cdcbox.connect.connectors import apply, render
from cdcbox.connect.services import Service
from cdcbox.names import DbNames
from cdcbox.producer.messages import message_body
from cdcbox.producer.outbox import ISO_FORMAT, NewEvent, event_row
from cdcbox.replication import ensure_slot
from cdcbox.resources import resource_dir
from cdcbox.stack.endpoints import Endpoints
from cdcbox.stack.secrets import read_password_properties
from tests.helpers import drop_slot_once_released, migrated_schema, unique

SPEC = resource_dir("connectors") / "messages" / "outbox-messages.yaml"
BUSINESS = "ledger_business"


@dataclass(frozen=True)
class MessagesOutbox:
    """A messages-mode schema, its slot and its connector."""

    names: DbNames
    service: Service

    @property
    def slot(self) -> str:
        return self.service.slot

    @property
    def connector(self) -> str:
        return self.service.connector

    def apply(self, client: ConnectClient) -> None:
        spec = render(SPEC, {**os.environ, **self.service.variables()})
        apply(client, spec, timeout_s=120)

    def recreate_slot(self, dsn: str) -> None:
        with psycopg.connect(dsn, autocommit=True) as conn:
            ensure_slot(conn, self.slot)


@contextmanager
def messages_outbox(stack: Endpoints, client: ConnectClient) -> Iterator[MessagesOutbox]:
    """Migrated, its business table made, its connector RUNNING; all removed after."""
    schema = unique("msg")
    service = Service(schema, schema=schema)
    # Migrated as the service its spec declares: its own Debezium role, with the password
    # the worker reads.
    password = read_password_properties(Path(stack.debezium_password_file))
    names = migrated_schema(
        stack.dsn, service.names, "messages", service.slot, debezium_password=password
    )
    with psycopg.connect(stack.dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                "CREATE TABLE {} (event_id uuid PRIMARY KEY, aggregate_type text NOT NULL, "
                "aggregate_id text NOT NULL, event_type text NOT NULL, n bigint NOT NULL)"
            ).format(sql.Identifier(schema, BUSINESS))
        )
    outbox = MessagesOutbox(names, service)
    outbox.apply(client)
    try:
        yield outbox
    finally:
        if client.config(outbox.connector) is not None:
            client.delete(outbox.connector)
        drop_slot_once_released(stack.dsn, outbox.slot)
        with psycopg.connect(stack.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
            conn.execute(
                sql.SQL("DROP PUBLICATION IF EXISTS {}").format(sql.Identifier(names.publication))
            )
            role = sql.Identifier(names.debezium_role)
            conn.execute(sql.SQL("DROP OWNED BY {}; DROP ROLE {}").format(role, role))


def record_business(conn: psycopg.Connection[Any], names: DbNames, event: NewEvent, n: int) -> None:
    """The business row of `event`, in the caller's transaction: what committed."""
    conn.execute(
        sql.SQL("INSERT INTO {} VALUES (%s, %s, %s, %s, %s)").format(
            sql.Identifier(names.schema, BUSINESS)
        ),
        (event.event_id, event.aggregate_type, event.aggregate_id, event.event_type, n),
    )


def emit_unguarded(conn: psycopg.Connection[Any], names: DbNames, event: NewEvent) -> None:
    """The emitting function's message without its slot check (the safeguard-off row):
    the same prefix and content, straight to `pg_logical_emit_message`."""
    body = message_body(event_row(event).params())
    conn.execute(
        'SELECT pg_logical_emit_message(true, %s, convert_to(\'{"occurred_at":"\' || '
        "to_char(clock_timestamp() AT TIME ZONE 'UTC', %s) || '\",', 'UTF8') || %s)",
        (names.message_prefix, ISO_FORMAT, body),
    )


def committed_business(
    dsn: str, aggregate_type: str, names: DbNames, skip_type: str
) -> dict[uuid.UUID, tuple[str, int]]:
    """event id -> (aggregate id, n) of every committed business row of the type."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            sql.SQL(
                "SELECT event_id, aggregate_id, n FROM {} "
                "WHERE aggregate_type = %s AND event_type <> %s"
            ).format(sql.Identifier(names.schema, BUSINESS)),
            (aggregate_type, skip_type),
        ).fetchall()
    return {r[0]: (r[1], int(r[2])) for r in rows}
