"""What the consumer and its stores need of a database session, whichever the database.

A psycopg `Connection` is one as it is; on MariaDB `cdcbox.mariadb.session` wraps a
PyMySQL connection into one. Both take `%s` placeholders. A handler that
annotates its `conn` with `Session` and writes SQL both databases accept runs unchanged
on either.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import Any, Protocol


class Rows(Protocol):
    """A statement's result: its rows (tuples) and how many rows it wrote."""

    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Session(Protocol):
    """One database session in autocommit mode outside `transaction()`.

    Guarantee: what runs inside the outermost `transaction()` block commits together when
    the block ends, or rolls back with the exception that leaves it; a nested block is a
    savepoint."""

    @property
    def closed(self) -> bool: ...

    def execute(self, query: Any, params: Any = None) -> Rows: ...

    def cursor(self) -> Any: ...

    def transaction(self) -> AbstractContextManager[Any]: ...


class SessionSource(Protocol):
    """The consumer's one session, reopened after it broke (`cdcbox.db.Reconnecting`, or
    MariaDB's in `cdcbox.mariadb.session`). `guard` keeps the session from being
    replaced until `unguard` where commits may be asynchronous (see `Reconnecting`)."""

    def __call__(self) -> Session: ...

    def guard(self) -> None: ...

    def unguard(self) -> None: ...

    @property
    def guarded(self) -> bool: ...

    @property
    def alive(self) -> bool: ...

    def close(self) -> None: ...


class AsyncRows(Protocol):
    """An async statement's result (psycopg's `AsyncCursor` is one)."""

    @property
    def rowcount(self) -> int: ...

    async def fetchone(self) -> Any: ...

    async def fetchall(self) -> list[Any]: ...


class AsyncSession(Protocol):
    """What an `AsyncHandler` gets: psycopg's `AsyncConnection` on PostgreSQL, the
    view of `cdcbox.mariadb.async_session` on MariaDB; both views of the record's own
    session, inside its transaction (`transaction()` is a savepoint)."""

    async def execute(self, query: Any, params: Any = None) -> AsyncRows: ...

    def cursor(self) -> Any: ...

    def transaction(self) -> AbstractAsyncContextManager[Any]: ...
