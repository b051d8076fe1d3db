"""A database as cdcbox uses it: one object per database, chosen once from the DSN
(`cdcbox.databases.database_for`), that gives the consumer its sessions and stores, a
handler its outbox, the polling relay its store, and `db migrate` its migrations.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from cdcbox.avro import Catalogue
from cdcbox.dsn import DatabaseKind
from cdcbox.limits import EventLimits
from cdcbox.migrate import PARTS, Part, RelayMode
from cdcbox.names import DbNames
from cdcbox.seam.outbox import OutboxWriter
from cdcbox.seam.relay import RelayDatabase
from cdcbox.seam.stores import Stores
from cdcbox.session import AsyncSession, Session, SessionSource


@dataclass(frozen=True)
class ConsumerState:
    """What a consumer keeps its state with: its session, its stores, its durability
    barrier, and the asynchronous view of a session an `AsyncHandler` runs on."""

    sessions: SessionSource
    stores: Stores
    # Flushes the session's asynchronous commits; None where every COMMIT is durable.
    barrier: Callable[[Session], None] | None
    ping: Callable[[], str | None]  # None, or why the database does not answer
    async_view: Callable[[Session], AsyncSession]


@dataclass(frozen=True)
class Migration:
    """What `db migrate` asks for: the tables of `parts` in `names`, for `relay`
    (None: the database's default), with the Debezium role's password, the slot where
    the relay reads the WAL, and the service's own role to grant the tables to."""

    names: DbNames = DbNames()
    relay: RelayMode | None = None
    parts: tuple[Part, ...] = PARTS
    debezium_password: str | None = None
    slot: str | None = None
    limits: EventLimits = EventLimits()
    grant_to: str | None = None


@dataclass(frozen=True)
class Migrated:
    """What a migration did: the versions applied, and whether it created the schema."""

    applied: list[str]
    created_schema: bool = False


class Database(Protocol):
    """One database, by its DSN."""

    @property
    def kind(self) -> DatabaseKind: ...

    @property
    def outages(self) -> tuple[type[Exception], ...]:
        """What the relay's worker waits out: the database's errors for a server gone."""
        ...

    def consumer_state(self, names: DbNames, durable_each_commit: bool) -> ConsumerState:
        """The consumer's sessions and stores in `names`."""
        ...

    def outbox(self, names: DbNames, schemas: Catalogue | None, messages: bool) -> OutboxWriter:
        """The outbox a handler emits to (`messages`: as logical decoding messages,
        PostgreSQL's; refused with `ConfigError` where the database has none)."""
        ...

    def relay_store(self, names: DbNames, lease_check: bool) -> RelayDatabase:
        """A polling relay worker's store on the outbox in `names`."""
        ...

    def migrate(self, migration: Migration) -> Migrated:
        """Apply what is pending (idempotent)."""
        ...
