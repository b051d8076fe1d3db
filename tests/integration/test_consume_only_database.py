"""A consume-only database (issue 24): `db migrate --only inbox` run by an ordinary role
(no REPLICATION, no superuser, no right to create roles or publications) makes what a
consumer needs and nothing a producer does: no Debezium role, no publication, no slot
pinning WAL. The consumer's real pipeline then applies events on it. Real PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner
from psycopg import sql

from cdcbox.cli.main import cli
from cdcbox.consumer import Event, Handler, Outcome
from cdcbox.migrate import PARTS, discover, migrate
from cdcbox.names import DbNames
from cdcbox.producer import NewEvent
from cdcbox.testing import Harness
from tests.helpers import login_role, unique

pytestmark = pytest.mark.integration


@pytest.fixture
def ordinary_role(database: str) -> Iterator[tuple[DbNames, str]]:
    """A login role that owns one schema and may do nothing else; the names of that schema
    (with a Debezium role and publication no one else uses) and the role's DSN."""
    names = DbNames(schema=unique("consumer"), debezium_role=unique("dbz"))
    with login_role(database, "app") as (role, role_dsn):
        with psycopg.connect(database, autocommit=True) as admin:
            admin.execute(
                sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(
                    sql.Identifier(names.schema), sql.Identifier(role)
                )
            )
        yield names, role_dsn


def producer_objects(database: str, names: DbNames) -> tuple[Any, ...]:
    with psycopg.connect(database) as conn:
        row = conn.execute(
            "SELECT (SELECT count(*) FROM pg_roles WHERE rolname = %s), "
            "(SELECT count(*) FROM pg_publication WHERE pubname = %s), "
            "to_regclass(%s) IS NOT NULL, to_regclass(%s) IS NOT NULL",
            (
                names.debezium_role,
                names.publication,
                f"{names.schema}.{names.outbox}",
                f"{names.schema}.{names.inbox}",
            ),
        ).fetchone()
    assert row is not None
    return tuple(row)


def test_migrations_are_split_into_what_consumers_and_producers_need() -> None:
    inbox = {m.version for m in discover("cdc", parts=("inbox",))}
    outbox = {m.version for m in discover("cdc", parts=("outbox",))}
    assert inbox == {
        "0002_inbox", "0004_parking", "0005_consumer_groups", "0006_inbox_purge_index",
        "0007_breaker",
    }  # fmt: skip
    assert "0001_outbox" in outbox and "cdc/0001_debezium" in outbox
    assert inbox | outbox == {m.version for m in discover("cdc", parts=PARTS)}


def test_an_ordinary_role_migrates_a_consume_only_database_with_nothing_of_a_producer(
    database: str, ordinary_role: tuple[DbNames, str]
) -> None:
    names, role_dsn = ordinary_role
    slots_before = slot_names(database)
    with psycopg.connect(role_dsn) as conn:
        applied = migrate(conn, names, mode="cdc", parts=("inbox",))
    assert "0002_inbox" in applied and "0001_outbox" not in applied
    # no Debezium role, no publication, no outbox; the inbox is there
    assert producer_objects(database, names) == (0, 0, False, True)
    assert slot_names(database) == slots_before
    # The CLI says the same, and a second run finds nothing to do.
    again = CliRunner().invoke(
        cli, ["--dsn", role_dsn, "--schema", names.schema, "db", "migrate", "--only", "inbox"]
    )
    assert again.exit_code == 0, again.output
    assert "up to date" in again.output
    # A full migration by the same role fails: a producer's objects need more rights.
    refused = CliRunner().invoke(
        cli, ["--dsn", role_dsn, "--schema", names.schema, "db", "migrate", "--no-slot"]
    )
    assert refused.exit_code != 0


def slot_names(database: str) -> set[str]:
    with psycopg.connect(database) as conn:
        return {r[0] for r in conn.execute("SELECT slot_name FROM pg_replication_slots")}


def test_a_consumer_runs_on_a_consume_only_database(
    database: str, ordinary_role: tuple[DbNames, str]
) -> None:
    names, role_dsn = ordinary_role
    with psycopg.connect(role_dsn) as conn:
        migrate(conn, names, mode="cdc", parts=("inbox",))
    applied: list[str] = []

    class Points(Handler):
        consumer_name = unique("points")
        aggregate_types = ("order",)
        event_types = frozenset({"OrderPaid"})

        def handle(self, event: Event, conn: psycopg.Connection[Any]) -> None:
            applied.append(event.aggregate_id)

    with Harness(role_dsn, [Points()], names=names) as harness:
        paid = NewEvent("order", "o1", "OrderPaid", {}, 1)
        assert harness.send(paid) == {Outcome.PROCESSED: 1}
    assert applied == ["o1"]
