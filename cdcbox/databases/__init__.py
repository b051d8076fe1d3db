"""The one place a database's implementation is picked: `database_for(dsn)` gives the
`cdcbox.seam.database.Database` of the database `dsn` names (`cdcbox.dsn`), PostgreSQL's
(`cdcbox.postgres`) or MariaDB's (`cdcbox.mariadb`, imported only when a MariaDB DSN
is used: its driver, PyMySQL, is the `mariadb` extra)."""

from __future__ import annotations

from cdcbox.dsn import database_kind
from cdcbox.postgres.database import PostgresDatabase
from cdcbox.seam.database import Database

__all__ = ["database_for"]


def database_for(dsn: str) -> Database:
    """The database `dsn` names."""
    if database_kind(dsn) == "MariaDB":
        from cdcbox.mariadb.database import MariaDbDatabase  # the `mariadb` extra

        return MariaDbDatabase(dsn)
    return PostgresDatabase(dsn)
