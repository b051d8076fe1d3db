"""Versioned, idempotent migrations of a MariaDB service's database (`schemas/mariadb`).

MariaDB commits each DDL statement on its own, so a migration cannot be one transaction
as on PostgreSQL: each file's statements are written to be re-runnable (`IF NOT EXISTS`),
the file is recorded once they all ran, and a named lock (`GET_LOCK`) makes a second
runner wait and then find nothing left to do. A file that failed half-way runs again
whole at the next `migrate`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cdcbox.errors import SchemaError, UsageError
from cdcbox.mariadb.connection import connect
from cdcbox.names import DbNames
from cdcbox.resources import resource_dir

_LOCK = "cdcbox_migrate"
# The DbNames fields the files under schemas/mariadb may reference as `{name}`.
_TABLES = (
    "outbox", "migrations", "inbox", "versions", "reconciliation", "parked", "bindings",
    "breakers", "breaker_failures",
)  # fmt: skip
_LOCK_WAIT_S = 60


@dataclass(frozen=True)
class MariaDbMigration:
    """One versioned SQL file of `schemas/mariadb`, rendered with the service's names."""

    version: str
    path: Path

    @property
    def part(self) -> str:
        """What the file builds: "outbox" (a producer's) or "inbox" (a consumer's)."""
        return "outbox" if "outbox" in self.version else "inbox"

    def statements(self, names: DbNames) -> list[str]:
        """The file's statements (split at `;` ending a line), names filled in: they are
        validated plain identifiers (`DbNames`), so they need no quoting."""
        values = {name: getattr(names, name) for name in _TABLES}
        try:
            text = self.path.read_text().format(**values)
        except (KeyError, ValueError) as e:
            raise SchemaError(f"migration {self.path} references an unknown name: {e}") from e
        lines = [line for line in text.splitlines() if not line.lstrip().startswith("--")]
        return [s.strip() for s in "\n".join(lines).split(";\n") if s.strip().rstrip(";")]


def discover(root: Path | None = None) -> list[MariaDbMigration]:
    base = root or resource_dir("schemas") / "mariadb"
    return [MariaDbMigration(p.stem, p) for p in sorted(base.glob("*.sql"))]


def migrate(
    conn: Any, names: DbNames = DbNames(), parts: tuple[str, ...] = ("outbox", "inbox")
) -> list[str]:
    """Apply the pending migrations of `parts` on `conn` (a PyMySQL connection to the
    service's database); returns the versions applied (none when up to date)."""
    with conn.cursor() as cur:
        cur.execute("SELECT GET_LOCK(%s, %s)", (_LOCK, _LOCK_WAIT_S))
        row = cur.fetchone()
        if not row or row[0] != 1:
            raise SchemaError(
                f"another migration of this database held the lock {_LOCK!r} for "
                f"{_LOCK_WAIT_S} s; retry once it ended"
            )
        try:
            cur.execute(
                f"CREATE TABLE IF NOT EXISTS {names.migrations} ("
                "version VARCHAR(200) CHARACTER SET ascii NOT NULL PRIMARY KEY, "
                "applied_at DATETIME(6) NOT NULL DEFAULT UTC_TIMESTAMP(6)) ENGINE = InnoDB"
            )
            cur.execute(f"SELECT version FROM {names.migrations}")
            done = {r[0] for r in cur.fetchall()}
            applied = []
            for migration in discover():
                if migration.version in done or migration.part not in parts:
                    continue
                for statement in migration.statements(names):
                    cur.execute(statement)
                cur.execute(
                    f"INSERT INTO {names.migrations} (version) VALUES (%s)", (migration.version,)
                )
                conn.commit()
                applied.append(migration.version)
            return applied
        finally:
            cur.execute("SELECT RELEASE_LOCK(%s)", (_LOCK,))
            conn.commit()


def migrate_dsn(dsn: str, names: DbNames, relay: str | None, parts: tuple[str, ...]) -> list[str]:
    """`cdc-ctl db migrate` on a MariaDB DSN: the outbox (published by the polling relay)
    and the consumers' tables, or the `parts` asked for; a relay other than the polling
    one is refused, naming it."""
    if relay not in (None, "polling"):
        raise UsageError(
            f"--relay {relay}: a MariaDB outbox is published by cdcbox's polling relay only "
            "(Debezium's MariaDB connector is not part of cdcbox); use --relay polling"
        )
    conn = connect(dsn)
    try:
        return migrate(conn, names, parts)
    finally:
        conn.close()
