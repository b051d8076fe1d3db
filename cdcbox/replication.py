"""What Debezium reads a schema's events through, made ready by `db migrate`: the
insert-only publication of the outbox (or, for the messages mode, one that covers no
table), the Debezium role's password, and the replication slot.
"""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg import sql

from cdcbox.errors import SchemaError, UsageError
from cdcbox.names import DbNames


def refuse_table_publication(conn: psycopg.Connection[Any], names: DbNames) -> None:
    """The messages mode's publication must cover no table: a connector streaming one
    would publish its rows as change events beside the messages."""
    covered = conn.execute(
        "SELECT schemaname || '.' || tablename FROM pg_publication_tables WHERE pubname = %s",
        (names.publication,),
    ).fetchall()
    if covered:
        raise SchemaError(
            f"publication {names.publication!r} covers {', '.join(t for (t,) in covered)}: "
            "the messages mode's publication covers no table; give this schema its own"
        )


def ensure_publication(conn: psycopg.Connection[Any], names: DbNames) -> None:
    """The insert-only publication of this schema's outbox, created if missing.

    Guarantee: the outbox table is in `names.publication` when this returns. A publication
    of that name that covers no table (its table was dropped with its schema) takes this
    one; one that covers another table (another service's) is refused, naming it, since a
    connector streaming it would publish none of this outbox's rows.
    """
    publication = sql.Identifier(names.publication)
    if (
        conn.execute(
            "SELECT FROM pg_publication WHERE pubname = %s", (names.publication,)
        ).fetchone()
        is None
    ):
        conn.execute(
            sql.SQL("CREATE PUBLICATION {} FOR TABLE {} WITH (publish = 'insert')").format(
                publication, names.table("outbox")
            )
        )
        return
    if publication_covers(conn, names.publication, names.outbox_qualified):
        return
    covered = conn.execute(
        "SELECT schemaname || '.' || tablename FROM pg_publication_tables WHERE pubname = %s",
        (names.publication,),
    ).fetchall()
    if not covered:
        conn.execute(
            sql.SQL("ALTER PUBLICATION {} ADD TABLE {}").format(publication, names.table("outbox"))
        )
        return
    raise SchemaError(
        f"publication {names.publication!r} covers {', '.join(t for (t,) in covered)}, not "
        f"{names.outbox_qualified}: it belongs to another outbox; give this schema its own "
        "(the default for a schema other than public is cdcbox_outbox_<schema>)"
    )


def publication_covers(conn: psycopg.Connection[Any], publication: str, table: str) -> bool:
    """Whether `publication` publishes `table` ("schema.table")."""
    schema, _, name = table.partition(".")
    return (
        conn.execute(
            "SELECT FROM pg_publication_tables WHERE pubname = %s AND schemaname = %s "
            "AND tablename = %s",
            (publication, schema, name),
        ).fetchone()
        is not None
    )


def set_password(conn: psycopg.Connection[Any], role: str, password: str) -> None:
    """Set `role`'s password without the password ever reaching the server: libpq
    computes the verifier (SCRAM-SHA-256, as `password_encryption` asks) on the client,
    as psql's \\password does, so a server logging DDL logs only the verifier."""
    verifier = conn.pgconn.encrypt_password(password.encode(), role.encode())
    conn.execute(
        sql.SQL("ALTER ROLE {} PASSWORD {}").format(
            sql.Identifier(role), sql.Literal(verifier.decode())
        )
    )


PLUGIN = "pgoutput"


def ensure_slot(conn: psycopg.Connection[Any], name: str) -> bool:
    """Create logical slot `name` (pgoutput) unless it exists; True when created now.

    Guarantee: every outbox row committed after this returns is retained for the
    connector that later streams from the slot, however late it is first applied.
    """
    with conn.transaction():
        row = conn.execute(
            "SELECT plugin, database, current_database() FROM pg_replication_slots "
            "WHERE slot_name = %s",
            (name,),
        ).fetchone()
    if row is not None:
        if row[1] != row[2]:
            raise SchemaError(
                f"replication slot {name!r} belongs to database {row[1]!r}, not {row[2]!r}: "
                "slots are per cluster; give this database's connector a slot of its own"
            )
        if row[0] != PLUGIN:
            raise SchemaError(
                f"replication slot {name!r} exists with plugin {row[0]!r}, not {PLUGIN}"
            )
        return False
    try:
        # Its own transaction: PostgreSQL refuses to create a logical slot in a
        # transaction that has written anything.
        with conn.transaction():
            conn.execute("SELECT pg_create_logical_replication_slot(%s, %s)", (name, PLUGIN))
    except psycopg.errors.InsufficientPrivilege as e:
        raise UsageError(
            f"cannot create replication slot {name!r}: the migrating role lacks REPLICATION "
            "(grant it, or pass --no-slot and let the connector create the slot)"
        ) from e
    except psycopg.errors.DuplicateObject:
        return False  # a concurrent migrate created it first
    return True
