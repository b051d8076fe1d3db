"""An async handler's view of a MariaDB session: `AsyncMariaDbSession`.

On PostgreSQL an `AsyncHandler` gets psycopg's `AsyncConnection` over the consumer's own
libpq connection. PyMySQL has no async mode, so on MariaDB the view awaits the record's
`MariaDbSession` directly: each statement runs on the handlers' event loop while the
consumer's thread waits for the coroutine, exactly one at a time, inside the record's
transaction. What differs from PostgreSQL is that a statement's round trip holds the
loop (other coroutines of the handler wait for it), which the consumer, awaiting one
record at a time, never notices.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from cdcbox.mariadb.session import MariaDbCursor, MariaDbSession


class AsyncMariaDbSession:
    """The `AsyncSession` surface over a `MariaDbSession` (see the module docstring)."""

    def __init__(self, session: MariaDbSession) -> None:
        self.session = session

    async def execute(self, query: Any, params: Any = None) -> AsyncMariaDbCursor:
        return AsyncMariaDbCursor(self.session.execute(query, params))

    def cursor(self) -> AsyncMariaDbCursor:
        return AsyncMariaDbCursor(self.session.cursor())

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[AsyncMariaDbSession]:
        """A savepoint inside the record's transaction (commits with it, or not)."""
        with self.session.transaction():
            yield self


class AsyncMariaDbCursor:
    """A `MariaDbSession` cursor with psycopg's `AsyncCursor` calls."""

    def __init__(self, cursor: MariaDbCursor) -> None:
        self._cursor = cursor

    @property
    def rowcount(self) -> int:
        return self._cursor.rowcount

    async def execute(self, query: Any, params: Any = None) -> AsyncMariaDbCursor:
        self._cursor.execute(query, params)
        return self

    async def executemany(self, query: str, params: Any) -> AsyncMariaDbCursor:
        self._cursor.executemany(query, params)
        return self

    async def fetchone(self) -> Any:
        return self._cursor.fetchone()

    async def fetchall(self) -> list[Any]:
        return self._cursor.fetchall()

    async def __aenter__(self) -> AsyncMariaDbCursor:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._cursor.close()
