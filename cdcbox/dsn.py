"""Which database a DSN names: the one place cdcbox reads a DSN's scheme.

`mariadb://` and `mysql://` name MariaDB (PyMySQL); anything else is PostgreSQL's
(`postgresql://`, `postgres://` or a libpq key=value string). `cdcbox.databases` picks
the database's implementation from this answer; nothing else looks at the scheme.
"""

from __future__ import annotations

from typing import Literal

DatabaseKind = Literal["PostgreSQL", "MariaDB"]
MARIADB_SCHEMES = ("mariadb", "mysql")


def database_kind(dsn: str) -> DatabaseKind:
    """The database `dsn` names."""
    return "MariaDB" if dsn.split(":", 1)[0].lower() in MARIADB_SCHEMES else "PostgreSQL"
