"""Sessions on MariaDB (PyMySQL): the DSN, the connection, and which errors mean the
server is gone.

A DSN is `mariadb://user[:password]@host[:port]/database` (`mysql://` alike), with an
optional `?option_file=PATH`: a MariaDB client option file whose `[client]` group holds
the password (and whatever else libmariadb's tools read there), so no password needs to
be in the DSN. Every message names a server with `describe`, never the password.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from cdcbox.dsn import database_kind
from cdcbox.errors import ConfigError, DatabaseUnavailable, LoginRefused

DEFAULT_PORT = 3306
# Client-side errors of a lost or refused connection (PyMySQL's CR_* codes and the
# server's "gone away" family): the remedy is to reconnect, not to fail the row.
_LOST = {2003, 2006, 2013, 2014, 2045, 2055, 1053, 1927}


@dataclass(frozen=True)
class MariaDbDsn:
    """A parsed MariaDB DSN; `password` None: from `option_file`, or none."""

    user: str
    host: str
    port: int
    database: str
    password: str | None = None
    option_file: str | None = None

    @classmethod
    def parse(cls, dsn: str) -> MariaDbDsn:
        parts = urlsplit(dsn)
        if database_kind(dsn) != "MariaDB":
            raise ConfigError(f"not a MariaDB DSN (expected mariadb://…): {cls._safe(dsn)}")
        database = parts.path.lstrip("/")
        if not parts.hostname or not parts.username or not database:
            raise ConfigError(
                f"MariaDB DSN {cls._safe(dsn)}: expected mariadb://user@host[:port]/database"
            )
        query = parse_qs(parts.query)
        unknown = set(query) - {"option_file"}
        if unknown:
            raise ConfigError(
                f"MariaDB DSN {cls._safe(dsn)}: unknown option(s) {', '.join(sorted(unknown))} "
                "(only option_file)"
            )
        try:
            port = parts.port or DEFAULT_PORT
        except ValueError as e:
            raise ConfigError(f"MariaDB DSN {cls._safe(dsn)}: {e}") from e
        return cls(
            user=unquote(parts.username),
            host=parts.hostname,
            port=port,
            database=unquote(database),
            password=unquote(parts.password) if parts.password is not None else None,
            option_file=query.get("option_file", [None])[0],
        )

    @staticmethod
    def _safe(dsn: str) -> str:
        """The DSN with any password replaced, for an error message."""
        parts = urlsplit(dsn)
        if parts.password is None:
            return dsn
        return dsn.replace(f":{parts.password}@", ":***@", 1)

    def describe(self) -> str:
        """`user@host:port/database`: what locates the server, never its password."""
        return f"{self.user}@{self.host}:{self.port}/{self.database}"


def connect(dsn: str | MariaDbDsn, *, autocommit: bool = False, timeout_s: int = 10) -> Any:
    """A PyMySQL connection (autocommit off: statements run in a transaction that the
    caller commits). `DatabaseUnavailable`, naming the server, when it does not answer."""
    pymysql = driver()
    parsed = dsn if isinstance(dsn, MariaDbDsn) else MariaDbDsn.parse(dsn)
    options: dict[str, Any] = {}
    if parsed.password is not None:
        options["password"] = parsed.password
    if parsed.option_file is not None:
        options["read_default_file"] = parsed.option_file
    try:
        return pymysql.connect(
            host=parsed.host,
            port=parsed.port,
            user=parsed.user,
            database=parsed.database,
            autocommit=autocommit,
            connect_timeout=timeout_s,
            charset="utf8mb4",
            **options,
        )
    except pymysql.err.OperationalError as e:
        detail = e.args[-1] if e.args else e
        if e.args and e.args[0] in _LOGIN_REFUSED:
            raise LoginRefused(
                f"MariaDB at {parsed.describe()} refused the login: {detail} (check the user "
                "and password of the DSN, or its option file)"
            ) from None
        raise DatabaseUnavailable(f"MariaDB at {parsed.describe()} is unreachable: {detail}") from e


# The server's error numbers for a refused login: ER_DBACCESS_DENIED_ERROR,
# ER_ACCESS_DENIED_ERROR, ER_ACCESS_DENIED_NO_PASSWORD_ERROR.
_LOGIN_REFUSED = {1044, 1045, 1698}


def driver() -> Any:
    """PyMySQL (the `mariadb` extra, imported where it is needed), or a `ConfigError`
    saying how to install it."""
    try:
        import pymysql
    except ImportError as e:
        raise ConfigError(
            "a MariaDB DSN needs the PyMySQL driver: pip install 'cdcbox[mariadb]'"
        ) from e
    return pymysql


def is_outage(error: BaseException) -> bool:
    """True when `error` says the MariaDB server is unreachable or dropped the session."""
    import pymysql

    if isinstance(error, DatabaseUnavailable):
        return True
    if isinstance(error, pymysql.err.InterfaceError):  # the connection is already closed
        return True
    if isinstance(error, pymysql.err.OperationalError) and error.args:
        return error.args[0] in _LOST
    return False
