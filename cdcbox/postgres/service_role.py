"""A service's own database role: it may use cdcbox's tables of its schema (and their
sequences), and nothing of another service's schema it was not granted.

`db migrate --grant-to ROLE` grants it; `doctor --service-role ROLE` checks it: what the
role needs, and any table outside its schema it may read. PUBLIC keeps nothing on a
service's own schema (a schema other than `public`)."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from cdcbox.names import DbNames

# Columns of DbNames that name cdcbox's tables (not the schema, publication or role).
_NOT_TABLES = {"schema", "publication", "debezium_role"}


def cdcbox_tables(conn: psycopg.Connection[Any], names: DbNames) -> list[str]:
    """cdcbox's tables that exist in `names`' schema (an inbox-only one has no outbox)."""
    wanted = [getattr(names, f) for f in names.__dataclass_fields__ if f not in _NOT_TABLES]
    rows = conn.execute(
        "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE n.nspname = %s AND c.relname = ANY(%s) AND c.relkind IN ('r', 'p') ORDER BY 1",
        (names.schema, wanted),
    ).fetchall()
    return [r[0] for r in rows]


def grant_service_role(conn: psycopg.Connection[Any], names: DbNames, role: str) -> None:
    """Give `role` (which must exist) the use of cdcbox's tables in `names`' schema, in
    the caller's transaction; a schema of its own is closed to PUBLIC."""
    schema, who = sql.Identifier(names.schema), sql.Identifier(role)
    conn.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(schema, who))
    for table in cdcbox_tables(conn, names):
        conn.execute(
            sql.SQL("GRANT SELECT, INSERT, UPDATE, DELETE ON {} TO {}").format(
                sql.Identifier(names.schema, table), who
            )
        )
    conn.execute(
        sql.SQL("GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA {} TO {}").format(schema, who)
    )
    if names.schema != "public":
        conn.execute(sql.SQL("REVOKE ALL ON SCHEMA {} FROM PUBLIC").format(schema))


def missing_rights(conn: psycopg.Connection[Any], names: DbNames, role: str) -> list[str]:
    """The cdcbox tables of the schema `role` may not read and write."""
    return [
        table
        for table in cdcbox_tables(conn, names)
        if not conn.execute(
            "SELECT has_table_privilege(%s, %s, 'SELECT, INSERT, UPDATE, DELETE')",
            (role, f"{names.schema}.{table}"),
        ).fetchone()[0]  # type: ignore[index]
    ]


def readable_tables(conn: psycopg.Connection[Any], role: str) -> list[str]:
    """Every table of this database outside the system schemas that `role` may read,
    as `schema.table` (a superuser reads them all)."""
    rows = conn.execute(
        "SELECT format('%%I.%%I', n.nspname, c.relname) FROM pg_class c "
        "JOIN pg_namespace n ON n.oid = c.relnamespace "
        "WHERE c.relkind IN ('r', 'p', 'v', 'm') "
        "AND n.nspname NOT IN ('pg_catalog', 'information_schema') "
        "AND n.nspname NOT LIKE 'pg_toast%%' "
        "AND has_schema_privilege(%s, n.oid, 'USAGE') "
        "AND has_table_privilege(%s, c.oid, 'SELECT') ORDER BY 1",
        (role, role),
    ).fetchall()
    return [r[0] for r in rows]


def readable_elsewhere(conn: psycopg.Connection[Any], names: DbNames, role: str) -> list[str]:
    """The tables outside `names`' schema that `role` may read."""
    return [t for t in readable_tables(conn, role) if not t.startswith(names.schema + ".")]
