"""Where a consumer keeps its state, chosen by its DSN's scheme: PostgreSQL (psycopg,
`postgresql://` or a libpq DSN) or MariaDB (PyMySQL, `mariadb://`, `mysql://`).

Both give the pipeline the same things: a `SessionSource`, the stores behind
`cdcbox.stores.protocols`, and whether commits need a durability barrier before the
offsets (PostgreSQL with asynchronous commits only; a MariaDB COMMIT that returned is
as durable as the server is configured to make it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import psycopg

from cdcbox.consumer.stores import Stores
from cdcbox.db import Reconnecting, durability_barrier
from cdcbox.errors import CdcboxError
from cdcbox.mariadb.connection import is_mariadb_dsn
from cdcbox.names import DbNames
from cdcbox.session import Session, SessionSource


@dataclass(frozen=True)
class ConsumerDatabase:
    """A consumer's database: its session, its stores, its durability barrier."""

    kind: Literal["PostgreSQL", "MariaDB"]
    sessions: SessionSource
    stores: Stores
    # Flushes the session's asynchronous commits; None where every COMMIT is durable.
    barrier: Callable[[Session], None] | None
    ping: Callable[[], str | None]  # None, or why the database does not answer


def consumer_database(dsn: str, names: DbNames, durable_each_commit: bool) -> ConsumerDatabase:
    if is_mariadb_dsn(dsn):
        return _mariadb(dsn, names)
    return ConsumerDatabase(
        "PostgreSQL",
        Reconnecting(dsn, synchronous_commit=durable_each_commit),
        Stores.for_schema(names),
        None if durable_each_commit else _barrier,
        lambda: _ping_postgresql(dsn),
    )


def _mariadb(dsn: str, names: DbNames) -> ConsumerDatabase:
    from cdcbox.mariadb.consumer_state import (  # the `mariadb` extra
        MariaDbBreakerState,
        MariaDbGroupBinding,
        MariaDbParking,
        MariaDbReconciliation,
    )
    from cdcbox.mariadb.inbox import MariaDbClaimAndAdvance, MariaDbInbox, MariaDbVersions
    from cdcbox.mariadb.session import MariaDbSessions, open_session

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

    def ping() -> str | None:
        try:
            session = open_session(dsn)
        except CdcboxError as e:
            return f"database unreachable: {type(e).__name__}"
        session.close()
        return None

    return ConsumerDatabase("MariaDB", MariaDbSessions(dsn), stores, None, ping)


def _barrier(conn: Session) -> None:
    assert isinstance(conn, psycopg.Connection)  # the PostgreSQL source's sessions
    durability_barrier(conn)


def _ping_postgresql(dsn: str) -> str | None:
    try:
        with psycopg.connect(dsn, connect_timeout=2) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as e:
        return f"database unreachable: {type(e).__name__}"
    return None
