"""A managed database's ordinary role (no superuser, no REPLICATION) migrates for the
polling relay, and the DDL can be printed for a team's own migration tool."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner
from psycopg import sql

from cdcbox.cli.main import cli
from cdcbox.migrate import migrate, recorded_relay_mode
from cdcbox.names import DbNames
from tests.helpers import unique

pytestmark = pytest.mark.integration


@pytest.fixture
def ordinary_role(database: str) -> Iterator[dict[str, Any]]:
    """A LOGIN role without SUPERUSER or REPLICATION that owns one schema, as a managed
    database hands out."""
    role, password = unique("app"), secrets.token_hex(16)
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE ROLE {} LOGIN NOSUPERUSER NOREPLICATION PASSWORD {}").format(
                sql.Identifier(role), sql.Literal(password)
            )
        )
        conn.execute(
            sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(
                sql.Identifier(role), sql.Identifier(role)
            )
        )
        info = conn.info
        params = {"host": info.host, "port": info.port, "dbname": info.dbname}
    yield {**params, "user": role, "password": password}
    with psycopg.connect(database, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(role)))
        conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


def test_an_ordinary_role_migrates_for_the_polling_relay(ordinary_role: dict[str, Any]) -> None:
    # Names this cluster has no role or publication for, as on a fresh managed database.
    schema = ordinary_role["user"]
    names = DbNames(schema=schema, debezium_role=f"{schema}_dbz", publication=f"{schema}_pub")
    with psycopg.connect(**ordinary_role) as conn:
        applied = migrate(conn, names=names, mode="polling")
        assert not any(v.startswith("cdc/") for v in applied)  # no role, no publication
        assert recorded_relay_mode(conn, names) == "polling"


def test_the_printed_ddl_applies_and_leaves_nothing_for_migrate(
    ordinary_role: dict[str, Any],
) -> None:
    names = DbNames(schema=ordinary_role["user"])
    printed = CliRunner().invoke(cli, ["--schema", names.schema, "db", "sql", "--relay", "polling"])
    assert printed.exit_code == 0, printed.output
    with psycopg.connect(**ordinary_role) as conn:
        conn.execute(printed.output)  # what a team's own migration tool would run
        conn.commit()
        assert migrate(conn, names=names, mode="polling") == []
