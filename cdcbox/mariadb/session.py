"""A PyMySQL connection as a `cdcbox.session.Session`, and a source that reopens it.

The session runs in autocommit mode outside `transaction()` (as the consumer's psycopg
session does), at READ COMMITTED (PostgreSQL's default level, which the stores' locking
is written for: no gap locks, a locking read sees the latest committed row). PyMySQL's
errors leave it translated: a lost or refused server as `DatabaseUnavailable` (the
consumer waits for it, charging no attempt), any other as `DatabaseError` with the
driver's error as its cause, so the steps handle both databases alike.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from cdcbox.errors import DatabaseError, DatabaseUnavailable
from cdcbox.mariadb.connection import MariaDbDsn, connect, is_outage

T = TypeVar("T")


class MariaDbSession:
    """One MariaDB session with the `Session` surface: `execute`, `cursor`, nested
    `transaction()` (savepoints), `closed`. Guarantee: the outermost `transaction()`
    commits on a clean exit and rolls back on any exception."""

    def __init__(self, conn: Any, server: str) -> None:
        self._conn = conn
        self._server = server
        self._depth = 0

    @property
    def closed(self) -> bool:
        return not self._conn.open

    @property
    def raw(self) -> Any:
        """The PyMySQL connection underneath (for code written for PyMySQL only)."""
        return self._conn

    def get_autocommit(self) -> bool:
        """False inside `transaction()`: what `MariaDbOutbox.append` checks."""
        return self._depth == 0

    def execute(self, query: Any, params: Any = None) -> MariaDbCursor:
        cursor = self.cursor()
        cursor.execute(query, params)
        return cursor

    def cursor(self) -> MariaDbCursor:
        return MariaDbCursor(self._conn.cursor(), self)

    @contextmanager
    def transaction(self) -> Iterator[MariaDbSession]:
        savepoint = f"cdcbox_sp{self._depth}"
        if self._depth == 0:
            self.call(self._conn.begin)
        else:
            self.execute(f"SAVEPOINT {savepoint}")
        self._depth += 1
        try:
            yield self
        except BaseException:
            self._depth -= 1
            self._undo(savepoint)
            raise
        self._depth -= 1
        if self._depth == 0:
            self.call(self._conn.commit)
        else:
            self.execute(f"RELEASE SAVEPOINT {savepoint}")

    def _undo(self, savepoint: str) -> None:
        """Roll back the block that failed; a session already gone has nothing to undo
        (the server rolled it back), and the block's own error is the one to raise."""
        if self.closed:
            return
        try:
            if self._depth == 0:
                self.call(self._conn.rollback)
            else:
                self.execute(f"ROLLBACK TO SAVEPOINT {savepoint}")
        except (DatabaseError, DatabaseUnavailable):
            pass

    def call(self, operation: Callable[..., T], *args: Any) -> T:
        """Run a driver call, its errors translated (see the module docstring)."""
        import pymysql

        try:
            return operation(*args)
        except pymysql.err.Error as e:
            detail = e.args[-1] if e.args else type(e).__name__
            if is_outage(e):
                self.close()
                raise DatabaseUnavailable(
                    f"MariaDB at {self._server} is unreachable: {detail}"
                ) from e
            code = f"{e.args[0]} " if len(e.args) > 1 else ""
            raise DatabaseError(f"MariaDB at {self._server}: {code}{detail}") from e

    def close(self) -> None:
        if self._conn.open:
            self._conn.close()


class MariaDbCursor:
    """A PyMySQL cursor whose errors are translated like the session's."""

    def __init__(self, cursor: Any, session: MariaDbSession) -> None:
        self._cursor = cursor
        self._session = session

    @property
    def rowcount(self) -> int:
        return int(self._cursor.rowcount)

    @property
    def lastrowid(self) -> int | None:
        return self._cursor.lastrowid  # type: ignore[no-any-return]

    def execute(self, query: Any, params: Any = None) -> MariaDbCursor:
        if isinstance(query, bytes):
            query = query.decode()
        self._session.call(self._cursor.execute, query, params)
        return self

    def executemany(self, query: str, params: Any) -> MariaDbCursor:
        self._session.call(self._cursor.executemany, query, params)
        return self

    def fetchone(self) -> Any:
        return self._session.call(self._cursor.fetchone)

    def fetchall(self) -> list[Any]:
        return list(self._session.call(self._cursor.fetchall))

    def __iter__(self) -> Iterator[Any]:
        return iter(self.fetchall())

    def __enter__(self) -> MariaDbCursor:
        return self

    def __exit__(self, *exc: object) -> None:
        self._cursor.close()

    def close(self) -> None:
        self._cursor.close()


class MariaDbSessions:
    """One session, reopened after it broke (the consumer's `SessionSource` on MariaDB).

    There is no per-session asynchronous commit on MariaDB (durability is the server's
    `innodb_flush_log_at_trx_commit`), so there is nothing to guard: a COMMIT that
    returned is as durable as the server is configured to make it."""

    def __init__(self, dsn: str) -> None:
        self.dsn = MariaDbDsn.parse(dsn)
        self._session: MariaDbSession | None = None

    def __call__(self) -> MariaDbSession:
        if self._session is None or self._session.closed:
            self._session = open_session(self.dsn)
        return self._session

    def guard(self) -> None:
        self()

    def unguard(self) -> None:
        pass

    @property
    def guarded(self) -> bool:
        return False

    @property
    def alive(self) -> bool:
        return self._session is not None and not self._session.closed

    def close(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None


def open_session(dsn: str | MariaDbDsn) -> MariaDbSession:
    """A session in autocommit mode at READ COMMITTED, its clock in UTC."""
    parsed = dsn if isinstance(dsn, MariaDbDsn) else MariaDbDsn.parse(dsn)
    session = MariaDbSession(connect(parsed, autocommit=True), parsed.describe())
    session.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
    session.execute("SET SESSION time_zone = '+00:00'")
    return session
