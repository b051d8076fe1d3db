"""MariaDB as the seam's `Database`: the consumer's tables of one database, its outbox
table (published by the polling relay), the relay's store and `db migrate`, over PyMySQL
(the `mariadb` extra, imported when a MariaDB DSN is first used).

There is no per-session asynchronous commit on MariaDB: a COMMIT that returned is as
durable as the server is configured to make it, so there is no durability barrier.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from cdcbox.avro import Catalogue
from cdcbox.errors import CdcboxError, ConfigError, ServiceUnavailable, UsageError
from cdcbox.mariadb.async_session import AsyncMariaDbSession
from cdcbox.mariadb.consumer_state import (
    MariaDbBreakerState,
    MariaDbGroupBinding,
    MariaDbParking,
    MariaDbReconciliation,
)
from cdcbox.mariadb.inbox import MariaDbClaimAndAdvance, MariaDbInbox, MariaDbVersions
from cdcbox.mariadb.migrate import migrate_dsn
from cdcbox.mariadb.outbox import MariaDbOutbox
from cdcbox.mariadb.relay_store import MariaDbRelayDatabase
from cdcbox.mariadb.session import MariaDbSession, MariaDbSessions, open_session
from cdcbox.names import DbNames
from cdcbox.seam.database import ConsumerState, Migrated, Migration
from cdcbox.seam.stores import Stores
from cdcbox.session import AsyncSession, Session


@dataclass(frozen=True)
class MariaDbDatabase:
    """The MariaDB database `dsn` (`mariadb://` or `mysql://`) names."""

    dsn: str
    kind: Literal["MariaDB"] = "MariaDB"
    # Its sessions report a server gone as DatabaseUnavailable.
    outages: tuple[type[Exception], ...] = (ServiceUnavailable,)

    def consumer_state(self, names: DbNames, durable_each_commit: bool) -> ConsumerState:
        inbox, versions = MariaDbInbox(names), MariaDbVersions(names)
        stores = Stores(
            inbox=inbox,
            reconciliation=MariaDbReconciliation(names),
            parking=MariaDbParking(names),
            versions=versions,
            bindings=MariaDbGroupBinding(names),
            claim_and_advance=MariaDbClaimAndAdvance(inbox, versions),
            breaker=MariaDbBreakerState(names),
        )
        return ConsumerState(MariaDbSessions(self.dsn), stores, None, self._ping, _async_view)

    def outbox(self, names: DbNames, schemas: Catalogue | None, messages: bool) -> MariaDbOutbox:
        if messages:
            raise ConfigError(
                "emit_messages: logical decoding messages are PostgreSQL's; a MariaDB "
                "consumer emits to its outbox table (published by the polling relay)"
            )
        return MariaDbOutbox(names, schemas)

    def relay_store(self, names: DbNames, lease_check: bool) -> MariaDbRelayDatabase:
        return MariaDbRelayDatabase(self.dsn, names, lease_check)

    def migrate(self, migration: Migration) -> Migrated:
        if migration.grant_to:
            raise UsageError("--grant-to grants PostgreSQL roles; on MariaDB, GRANT yourself")
        return Migrated(migrate_dsn(self.dsn, migration.names, migration.relay, migration.parts))

    def _ping(self) -> str | None:
        try:
            session = open_session(self.dsn)
        except CdcboxError as e:
            return f"database unreachable: {type(e).__name__}"
        session.close()
        return None


def _async_view(conn: Session) -> AsyncSession:
    if not isinstance(conn, MariaDbSession):
        raise UsageError(f"an AsyncHandler on MariaDB cannot run on a {type(conn).__name__}")
    return AsyncMariaDbSession(conn)
