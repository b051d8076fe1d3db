"""A consume-only database (issue 24): `db migrate --only inbox` run by an ordinary role
(no REPLICATION, no superuser, no right to create roles or publications) makes what a
consumer needs and nothing a producer does: no Debezium role, no publication, no slot
pinning WAL. The consumer's real pipeline then applies events on it. Real PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg
import pytest
from click.testing import CliRunner
from psycopg import sql

from cdcbox.cli.main import cli
from cdcbox.consumer import Event, Handler, Outcome
from cdcbox.migrate import PARTS, discover, migrate
from cdcbox.names import DbNames
from cdcbox.producer import NewEvent
from cdcbox.resources import resource_dir
from cdcbox.stack.config import Ports, StackConfig
from cdcbox.stack.postgres import NativePostgres
from cdcbox.stack.secrets import StackSecrets
from cdcbox.testing import Harness
from tests.helpers import free_port, login_role, unique

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
        "0007_breaker", "0012_inbox_unfinished_index", "0014_inbox_touched_statistics",
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


@pytest.fixture
def replica_cluster(tmp_path: Path) -> Iterator[str]:
    """A PostgreSQL cluster of its own running `wal_level=replica` (no logical decoding,
    as a consume-only service's managed database may run), started for this test and
    stopped by its postmaster's pid; its superuser's DSN."""
    config = StackConfig(
        state_dir=tmp_path / "cluster",
        cache_dir=tmp_path / "cache",
        infra_dir=resource_dir("infra"),
        ports=Ports(postgres=free_port()),
        database="points",
        service_databases=(),
        postgres_settings={"wal_level": "replica"},
    )
    secrets = StackSecrets(config.state_dir / "secrets")
    secrets.ensure(config.host, config.ports.postgres)
    server = NativePostgres(config, secrets)
    server.start()
    try:
        password = quote(secrets.superuser_password(), safe="")
        yield f"postgresql://postgres:{password}@{config.host}:{config.ports.postgres}/points"
    finally:
        server.stop()
        server.purge()


def test_a_consume_only_database_with_wal_level_replica_is_migrated_by_an_ordinary_role(
    replica_cluster: str,
) -> None:
    """What `--only inbox` promises, on the server setting it is for: no logical WAL
    needed. A producer's full migration there fails with one line naming wal_level."""
    with psycopg.connect(replica_cluster) as conn:
        assert conn.execute("SHOW wal_level").fetchone() == ("replica",)
    names = DbNames(schema="points")
    with login_role(replica_cluster, "points") as (role, role_dsn):
        with psycopg.connect(replica_cluster, autocommit=True) as admin:
            admin.execute(
                sql.SQL("CREATE SCHEMA points AUTHORIZATION {}").format(sql.Identifier(role))
            )
        migrated = CliRunner().invoke(
            cli, ["--dsn", role_dsn, "--schema", "points", "db", "migrate", "--only", "inbox"]
        )
        assert migrated.exit_code == 0, migrated.output
        assert "applied 0002_inbox" in migrated.output
        assert producer_objects(replica_cluster, names) == (0, 0, False, True)
        assert slot_names(replica_cluster) == set()
        with Harness(role_dsn, [points_handler()], names=names) as harness:
            assert harness.send(NewEvent("order", "o1", "OrderPaid", {}, 1)) == {
                Outcome.PROCESSED: 1
            }
    producer = CliRunner().invoke(cli, ["--dsn", replica_cluster, "db", "migrate"])
    assert producer.exit_code != 0
    assert "wal_level" in producer.output and "Traceback" not in producer.output
    assert len(producer.output.strip().splitlines()) == 1, producer.output


def points_handler() -> Handler:
    class Points(Handler):
        consumer_name = "points-service"
        aggregate_types = ("order",)
        event_types = frozenset({"OrderPaid"})

        def handle(self, event: Event, conn: psycopg.Connection[Any]) -> None:
            conn.execute("SELECT 1")

    return Points()
