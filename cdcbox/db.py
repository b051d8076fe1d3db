"""Opening PostgreSQL connections; psycopg's connection errors become `ServiceUnavailable`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg

from cdcbox.errors import ConfigError, ServiceUnavailable

# How the consumer's steps get their connection: called each time, so a `Reconnecting`
# can hand out a fresh one after the database restarted.
ConnectionSource = Callable[[], psycopg.Connection[Any]]


def connect(dsn: str, *, autocommit: bool = False) -> psycopg.Connection[Any]:
    """A connection, or `ConfigError` for a malformed DSN and `ServiceUnavailable` for a
    server that does not answer."""
    try:
        return psycopg.connect(dsn, autocommit=autocommit, application_name="cdcbox")
    except psycopg.ProgrammingError as e:
        raise ConfigError(f"the PostgreSQL DSN is malformed: {' '.join(str(e).split())}") from e
    except psycopg.OperationalError as e:
        host = dsn.split("@")[-1].split("?")[0]
        detail = " ".join(str(e).split())  # libpq's message spans lines
        raise ServiceUnavailable(f"PostgreSQL at {host} is unreachable: {detail}".strip()) from e


class Reconnecting:
    """One autocommit connection, reopened after it broke. Autocommit because every
    transaction of the consumer and the relay is an explicit `conn.transaction()` block;
    a long-running process must survive a database restart without being restarted."""

    def __init__(self, dsn: str) -> None:
        self.dsn = dsn
        self._conn: psycopg.Connection[Any] | None = None

    def __call__(self) -> psycopg.Connection[Any]:
        if self._conn is None or self._conn.closed or self._conn.broken:
            self._conn = connect(self.dsn, autocommit=True)
        return self._conn

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
