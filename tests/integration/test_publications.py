"""Per-service database objects that cannot collide (issue 24): each schema's outbox gets
a publication of its own, an existing publication that does not cover the table is
refused by name, a slot of another database is refused, and a CDC purge never trusts a
connector whose publication does not cover the outbox. Real PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql

from cdcbox.errors import SchemaError, UsageError
from cdcbox.migrate import migrate
from cdcbox.names import DEFAULT_PUBLICATION, DbNames
from cdcbox.ops.retention import purge_outbox
from cdcbox.producer import NewEvent, Outbox
from cdcbox.replication import ensure_slot
from tests.helpers import unique

pytestmark = pytest.mark.integration


@pytest.fixture
def schemas(database: str) -> Iterator[list[DbNames]]:
    """Make schemas on demand; each is dropped with its publication after the test."""
    made: list[DbNames] = []
    yield made
    with psycopg.connect(database, autocommit=True) as conn:
        for names in made:
            conn.execute(
                sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(names.schema))
            )
            if names.publication != DEFAULT_PUBLICATION:  # never the shared one
                conn.execute(
                    sql.SQL("DROP PUBLICATION IF EXISTS {}").format(
                        sql.Identifier(names.publication)
                    )
                )


def publication_covers(conn: psycopg.Connection[Any], publication: str, table: str) -> bool:
    schema, _, name = table.partition(".")
    row = conn.execute(
        "SELECT count(*) FROM pg_publication_tables WHERE pubname = %s AND schemaname = %s "
        "AND tablename = %s",
        (publication, schema, name),
    ).fetchone()
    return row == (1,)


def new_schema(database: str, schemas: list[DbNames], **names: Any) -> DbNames:
    made = DbNames(schema=unique("svc"), **names)
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(made.schema)))
    schemas.append(made)
    return made


def test_two_services_in_their_own_schemas_each_get_a_covering_publication(
    database: str, schemas: list[DbNames]
) -> None:
    first, second = new_schema(database, schemas), new_schema(database, schemas)
    with psycopg.connect(database) as conn:
        for names in (first, second):
            migrate(conn, names, mode="cdc")
        for names in (first, second):
            assert publication_covers(conn, names.publication, names.outbox_qualified)
    assert first.publication != second.publication
    assert DbNames().publication == "cdcbox_outbox"  # the public schema's, as it always was


def test_an_existing_publication_that_does_not_cover_the_outbox_is_refused(
    database: str, schemas: list[DbNames]
) -> None:
    other = new_schema(database, schemas)
    shared = new_schema(database, schemas, publication=other.publication)
    with psycopg.connect(database) as conn:
        migrate(conn, other, mode="cdc")
        with pytest.raises(SchemaError, match=other.publication):
            migrate(conn, shared, mode="cdc")


def test_a_slot_of_another_database_is_refused(database: str) -> None:
    other_db, slot = unique("otherdb"), unique("slot")
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(other_db)))
    info = psycopg.conninfo.conninfo_to_dict(database)
    info["dbname"] = other_db
    other_dsn = psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in info.items()})
    try:
        with psycopg.connect(other_dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", (slot,))
        with (
            psycopg.connect(database, autocommit=True) as conn,
            pytest.raises(SchemaError, match=f"{slot}.*belongs to database '{other_db}'"),
        ):
            ensure_slot(conn, slot)
    finally:
        with psycopg.connect(database, autocommit=True) as conn:
            conn.execute(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                "WHERE slot_name = %s",
                (slot,),
            )
            conn.execute(sql.SQL("DROP DATABASE {}").format(sql.Identifier(other_db)))


def test_a_cdc_purge_never_trusts_a_connector_that_does_not_publish_the_outbox(
    database: str, schemas: list[DbNames]
) -> None:
    names = new_schema(database, schemas)
    with psycopg.connect(database) as conn:
        migrate(conn, names, mode="cdc")
        with conn.transaction():
            Outbox(names).append(conn, NewEvent("order", "o1", "Created", {}))
    far = datetime(2999, 1, 1)
    others = {"table.include.list": "public.outbox_event", "publication.name": "cdcbox_outbox"}
    unpublished = {
        "table.include.list": names.outbox_qualified,
        "publication.name": "cdcbox_outbox",
    }
    with psycopg.connect(database, autocommit=True) as conn:
        for config in (others, unpublished):
            with pytest.raises(UsageError):
                purge_outbox(conn, timedelta(0), "cdc", far, names, connector_config=config)
        kept = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(names.table("outbox")))
        assert kept.fetchone() == (1,)
        mine = {"table.include.list": names.outbox_qualified, "publication.name": names.publication}
        assert (
            purge_outbox(conn, timedelta(0), "cdc", far, names, connector_config=mine).deleted == 1
        )


def test_a_schema_dropped_and_migrated_again_takes_back_its_empty_publication(
    database: str, schemas: list[DbNames]
) -> None:
    """DROP SCHEMA … CASCADE leaves the schema's publication behind, covering nothing
    (the bench does this on every run): migrating the schema again reuses it."""
    names = new_schema(database, schemas)
    with psycopg.connect(database, autocommit=True) as conn:
        migrate(conn, names, mode="cdc")
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(names.schema)))
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(names.schema)))
        migrate(conn, names, mode="cdc")
        assert publication_covers(conn, names.publication, names.outbox_qualified)
