"""Where a polling relay claims and settles rows: the outbox of a PostgreSQL schema or of
a MariaDB database, chosen by the DSN's scheme. The worker's loop, its Kafka side and its
guarantees are the same for both; only the session and the SQL differ.

Both sessions reconnect after the server went away, and report that as
`DatabaseUnavailable`, which the worker waits out.
"""

from __future__ import annotations

import contextlib
from typing import Any, Protocol

import psycopg

from cdcbox.db import Reconnecting
from cdcbox.errors import DatabaseUnavailable, ServiceUnavailable, UsageError
from cdcbox.mariadb import connection as mariadb
from cdcbox.names import DbNames
from cdcbox.relay.mariadb_store import MariaDbRelayStore
from cdcbox.relay.store import OutboxRow, RelayStore, refuse_unservable


class RelayDatabase(Protocol):
    """One worker's session on its outbox, and the relay's statements over it."""

    # Whether new rows can wake the worker (PostgreSQL's NOTIFY); without it, it polls.
    notifies: bool

    def open(self, listen: bool) -> None:
        """Open the session; the first one refuses an outbox this relay must not serve."""

    def claim(self, worker: str, limit: int, lease_s: float, ordered: bool) -> list[OutboxRow]:
        """Lease up to `limit` due rows to `worker`, oldest first."""

    def mark_sent(self, worker: str, ids: list[int]) -> int:
        """Mark `ids` SENT where `worker` still holds them."""

    def mark_failed(
        self, worker: str, max_attempts: int, failures: list[tuple[int, float, str, bool]]
    ) -> int:
        """(id, delay, error, permanent): RETRY after the delay, or DEAD."""

    def release(self, worker: str, ids: list[int]) -> int:
        """Give rows back unsent, without spending an attempt."""

    def close(self) -> None: ...


class PostgresRelayDatabase:
    """The outbox table of a PostgreSQL schema migrated for the polling relay."""

    notifies = True

    def __init__(self, dsn: str, names: DbNames, lease_check: bool) -> None:
        self.names = names
        self.store = RelayStore(names, lease_check=lease_check)
        self.connection = Reconnecting(dsn)
        self._servable = False

    def open(self, listen: bool) -> None:
        conn = self.connection()
        if not self._servable:
            refuse_unservable(conn, self.names, listen)
            self._servable = True

    def claim(self, worker: str, limit: int, lease_s: float, ordered: bool) -> list[OutboxRow]:
        return self.store.claim(self.connection(), worker, limit, lease_s, ordered)

    def mark_sent(self, worker: str, ids: list[int]) -> int:
        return self.store.mark_sent(self.connection(), worker, ids)

    def mark_failed(
        self, worker: str, max_attempts: int, failures: list[tuple[int, float, str, bool]]
    ) -> int:
        return self.store.mark_failed(self.connection(), worker, max_attempts, failures)

    def release(self, worker: str, ids: list[int]) -> int:
        return self.store.release(self.connection(), worker, ids)

    def close(self) -> None:
        self.connection.close()


class MariaDbRelayDatabase:
    """The outbox table of a MariaDB database (`cdcbox.mariadb`), polled: MariaDB has no
    NOTIFY. A statement that finds the server gone drops the session and raises
    `DatabaseUnavailable`; the next one opens another."""

    notifies = False

    def __init__(self, dsn: str, names: DbNames, lease_check: bool) -> None:
        self.dsn = mariadb.MariaDbDsn.parse(dsn)
        self.store = MariaDbRelayStore(names, lease_check=lease_check)
        self._conn: Any = None
        self._servable = False  # the outbox table checked on the first session

    def _session(self) -> Any:
        if self._conn is None:
            self._conn = mariadb.connect(self.dsn)
        return self._conn

    def _run(self, call: Any, *args: Any) -> Any:
        try:
            return call(self._session(), *args)
        except Exception as e:
            if not mariadb.is_outage(e):
                raise
            self.close()
            raise DatabaseUnavailable(
                f"MariaDB at {self.dsn.describe()} went away: {e.args[-1] if e.args else e}"
            ) from e

    def open(self, listen: bool) -> None:
        if not self._servable:
            self._run(self._refuse_unmigrated)
            self._servable = True
        self._session()

    def _refuse_unmigrated(self, conn: Any) -> None:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT COUNT(*) FROM information_schema.tables "
                "WHERE table_schema = DATABASE() AND table_name = %s",
                (self.store.table,),
            )
            (found,) = cur.fetchone()
        conn.commit()
        if not found:
            raise UsageError(
                f"no outbox table {self.store.table!r} in MariaDB database "
                f"{self.dsn.database!r}: run `cdc-ctl db migrate` on it first"
            )

    def claim(self, worker: str, limit: int, lease_s: float, ordered: bool) -> list[OutboxRow]:
        rows: list[OutboxRow] = self._run(self.store.claim, worker, limit, lease_s, ordered)
        return rows

    def mark_sent(self, worker: str, ids: list[int]) -> int:
        return int(self._run(self.store.mark_sent, worker, ids))

    def mark_failed(
        self, worker: str, max_attempts: int, failures: list[tuple[int, float, str, bool]]
    ) -> int:
        return int(self._run(self.store.mark_failed, worker, max_attempts, failures))

    def release(self, worker: str, ids: list[int]) -> int:
        return int(self._run(self.store.release, worker, ids))

    def close(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):  # a dead socket has nothing left to close
                self._conn.close()
            self._conn = None


def relay_database(dsn: str, names: DbNames, lease_check: bool = True) -> RelayDatabase:
    """The relay's database for `dsn`: MariaDB for `mariadb://` (or `mysql://`), else
    PostgreSQL."""
    if mariadb.is_mariadb_dsn(dsn):
        return MariaDbRelayDatabase(dsn, names, lease_check)
    return PostgresRelayDatabase(dsn, names, lease_check)


# What the worker's loop waits out: a service gone (a MariaDB session reports it as
# `DatabaseUnavailable`), or psycopg's own error for a PostgreSQL session that broke.
OUTAGES: tuple[type[Exception], ...] = (ServiceUnavailable, psycopg.OperationalError)
