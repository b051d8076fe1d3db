"""PostgreSQL as the seam's `Database`: the consumer's stores of one schema, the outbox
(`cdcbox.producer.Outbox`, or logical decoding messages), the polling relay's store and
`db migrate`, over psycopg.

A consumer's commits are asynchronous unless `durable_each_commit`: then the durability
barrier flushes them before the offsets are committed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import psycopg

from cdcbox.avro import Catalogue
from cdcbox.db import Reconnecting, connect, durability_barrier
from cdcbox.errors import ServiceUnavailable
from cdcbox.migrate import ensure_schema, migrate
from cdcbox.names import DbNames
from cdcbox.postgres.async_view import async_view
from cdcbox.postgres.breaker_state import BreakerState
from cdcbox.postgres.claim_guard import ClaimAndAdvance
from cdcbox.postgres.group_binding import GroupBinding
from cdcbox.postgres.inbox import Inbox
from cdcbox.postgres.parking import Parking
from cdcbox.postgres.reconciliation import Reconciliation
from cdcbox.postgres.relay_store import PostgresRelayDatabase
from cdcbox.postgres.service_role import grant_service_role
from cdcbox.postgres.version_guard import VersionGuard
from cdcbox.producer.outbox import Outbox
from cdcbox.seam.database import ConsumerState, Migrated, Migration
from cdcbox.seam.stores import Stores
from cdcbox.session import Session


def postgres_stores(names: DbNames = DbNames()) -> Stores:
    """PostgreSQL's stores of one schema."""
    return Stores(
        Inbox(names),
        Reconciliation(names),
        Parking(names),
        VersionGuard(names),
        GroupBinding(names),
        ClaimAndAdvance(names),
        BreakerState(names),
    )


@dataclass(frozen=True)
class PostgresDatabase:
    """The PostgreSQL database `dsn` names (a URL or a libpq key=value string)."""

    dsn: str
    kind: Literal["PostgreSQL"] = "PostgreSQL"
    # A session that broke raises psycopg's own error; a server gone, ServiceUnavailable.
    outages: tuple[type[Exception], ...] = (ServiceUnavailable, psycopg.OperationalError)

    def consumer_state(self, names: DbNames, durable_each_commit: bool) -> ConsumerState:
        return ConsumerState(
            Reconnecting(self.dsn, synchronous_commit=durable_each_commit),
            postgres_stores(names),
            None if durable_each_commit else _barrier,
            self._ping,
            async_view,
        )

    def outbox(self, names: DbNames, schemas: Catalogue | None, messages: bool) -> Outbox:
        return Outbox(names, schemas, messages=messages)

    def relay_store(self, names: DbNames, lease_check: bool) -> PostgresRelayDatabase:
        return PostgresRelayDatabase(self.dsn, names, lease_check)

    def migrate(self, migration: Migration) -> Migrated:
        with connect(self.dsn) as conn:
            created = ensure_schema(conn, migration.names)
            applied = migrate(
                conn,
                names=migration.names,
                mode=migration.relay or "cdc",
                debezium_password=migration.debezium_password,
                slot=migration.slot,
                limits=migration.limits,
                parts=migration.parts,
            )
            if migration.grant_to:
                with conn.transaction():
                    grant_service_role(conn, migration.names, migration.grant_to)
        return Migrated(applied, created_schema=created)

    def _ping(self) -> str | None:
        try:
            with psycopg.connect(self.dsn, connect_timeout=2) as conn:
                conn.execute("SELECT 1")
        except psycopg.Error as e:
            return f"database unreachable: {type(e).__name__}"
        return None


def _barrier(conn: Session) -> None:
    assert isinstance(conn, psycopg.Connection)  # the PostgreSQL source's sessions
    durability_barrier(conn)
