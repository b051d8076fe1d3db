"""Each service's database roles (issue 54, PostgreSQL): Debezium's role of a declared
service reads only that service's outbox; a service's own role (`db migrate --grant-to`)
uses cdcbox's tables of its schema and cannot read another service's; `doctor` checks
both, and fails on what each may read beyond."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from cdcbox.connect.services import Service
from cdcbox.databases import database_for
from cdcbox.ops.role_checks import debezium_role_check, service_role_check
from cdcbox.seam.database import Migration
from tests.helpers import unique

pytestmark = pytest.mark.integration


@pytest.fixture
def two_services(database: str) -> Iterator[tuple[Service, Service, str]]:
    """Services a and b, each its schema in one database, migrated (CDC) with their own
    Debezium role and their own login role; the password both roles log in with."""
    a, b = Service(unique("svca"), schema=unique("a")), Service(unique("svcb"), schema=unique("b"))
    password = secrets.token_urlsafe(16)
    with psycopg.connect(database, autocommit=True) as conn:
        for service in (a, b):
            conn.execute(
                sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
                    sql.Identifier(service.name), sql.Literal(password)
                )
            )
    for service in (a, b):
        database_for(database).migrate(
            Migration(names=service.names, relay="cdc", grant_to=service.name)
        )
    yield a, b, password
    with psycopg.connect(database, autocommit=True) as conn:
        for service in (a, b):
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(service.schema)))
            for role in (service.name, service.debezium_role):
                conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
                conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def test_a_services_debezium_role_reads_its_outbox_only(
    database: str, two_services: tuple[Service, Service, str]
) -> None:
    a, b, _ = two_services
    with psycopg.connect(database) as conn:
        ok = debezium_role_check(conn, a.debezium_role, a.names)
        assert ok.ok, ok.detail
        assert "other published" not in ok.detail  # b's outbox is b's role's
        readable = conn.execute(
            "SELECT has_table_privilege(%s, %s, 'SELECT')",
            (a.debezium_role, b.names.outbox_qualified),
        ).fetchone()
        assert readable == (False,)
        # The safeguard off: the role may read b's inbox too, and doctor says so.
        _grant_inbox(conn, b, a.debezium_role)
        leaked = debezium_role_check(conn, a.debezium_role, a.names)
        assert not leaked.ok
        assert f"{b.schema}.{b.names.inbox}" in leaked.detail


def test_a_services_role_uses_its_tables_and_cannot_read_anothers(
    database: str, two_services: tuple[Service, Service, str]
) -> None:
    a, b, password = two_services
    as_a = make_conninfo(database, user=a.name, password=password)
    with psycopg.connect(as_a) as conn:
        conn.execute(
            sql.SQL(
                "INSERT INTO {} (event_id, consumer_name, event_type, status) VALUES "
                "(gen_random_uuid(), 'c', 'T', 'PROCESSED')"
            ).format(sql.Identifier(a.schema, a.names.inbox))
        )
        conn.commit()
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(
                sql.SQL("SELECT 1 FROM {}").format(sql.Identifier(b.schema, b.names.inbox))
            )
    with psycopg.connect(database) as conn:
        assert service_role_check(conn, a.names, a.name).ok
        _grant_inbox(conn, b, a.name)
        wider = service_role_check(conn, a.names, a.name)
        assert not wider.ok and f"{b.schema}.{b.names.inbox}" in wider.detail


def _grant_inbox(conn: psycopg.Connection[Any], owner: Service, role: str) -> None:
    """A grant beyond: `role` may read `owner`'s inbox."""
    conn.execute(
        sql.SQL("GRANT USAGE ON SCHEMA {} TO {}; GRANT SELECT ON {} TO {}").format(
            sql.Identifier(owner.schema),
            sql.Identifier(role),
            sql.Identifier(owner.schema, owner.names.inbox),
            sql.Identifier(role),
        )
    )
