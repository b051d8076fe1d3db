"""A second service in its own schema of one database (issue 24): migrated and applied
with `--schema`, its events reach Kafka; a connector whose table is outside its
publication, or whose slot is another database's, is refused instead of reporting
RUNNING and publishing nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner
from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from psycopg import sql
from psycopg.conninfo import make_conninfo

from cdcbox.cli.main import cli
from cdcbox.names import DEFAULT_PUBLICATION, DbNames
from cdcbox.producer import NewEvent, Outbox
from cdcbox.stack.endpoints import Endpoints
from tests.e2e.topics import read_topic
from tests.helpers import unique

pytestmark = pytest.mark.e2e


@pytest.fixture
def service_schema(stack: Endpoints) -> Iterator[DbNames]:
    """A schema of its own, as a second service's; dropped with its publication after."""
    names = DbNames(schema=unique("svc"))
    with psycopg.connect(stack.dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(names.schema)))
    yield names
    with psycopg.connect(stack.dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(names.schema)))
        if names.publication != DEFAULT_PUBLICATION:  # never the shared one
            conn.execute(
                sql.SQL("DROP PUBLICATION IF EXISTS {}").format(sql.Identifier(names.publication))
            )


def migrate_and_write(stack: Endpoints, names: DbNames, slot: str, aggregate: str) -> list[Any]:
    runner = CliRunner()
    migrated = runner.invoke(cli, ["--schema", names.schema, "db", "migrate", "--slot", slot])
    assert migrated.exit_code == 0, migrated.output
    with psycopg.connect(stack.dsn) as conn, conn.transaction():
        return Outbox(names).append_many(
            conn, [NewEvent(aggregate, f"a{i}", "Created", {"i": i}) for i in range(5)]
        )


def test_a_service_in_its_own_schema_is_published(
    spec_file: Any, stack: Endpoints, service_schema: DbNames
) -> None:
    path, name = spec_file()
    aggregate = unique("svc")
    written = migrate_and_write(stack, service_schema, name.replace("-", "_"), aggregate)
    applied = CliRunner().invoke(cli, ["--schema", service_schema.schema, "apply", str(path)])
    assert applied.exit_code == 0, applied.output
    records = read_topic(stack, f"{name}.{aggregate}", expect=5, settle_ms=1000)
    assert sorted(dict(r.headers)["id"].decode() for r in records) == sorted(map(str, written))


def test_a_connector_whose_table_is_outside_its_publication_is_refused(
    spec_file: Any, stack: Endpoints, service_schema: DbNames
) -> None:
    path, name = spec_file(**{"table.include.list": service_schema.outbox_qualified})
    migrate_and_write(stack, service_schema, name.replace("-", "_"), unique("svc"))
    # The shared publication (public's) does not cover the service's table.
    refused = CliRunner().invoke(cli, ["apply", str(path)])
    assert refused.exit_code == 2, refused.output
    assert "cdcbox_outbox" in refused.output
    assert service_schema.outbox_qualified in refused.output
    assert "Traceback" not in refused.output


def test_apply_checks_the_database_the_connector_reads_not_the_dsns(
    spec_file: Any, stack: Endpoints
) -> None:
    """Audit 33, case 13: a schema migrated in another database, a spec naming that
    database (`database.dbname`) and that schema's table, applied with the default DSN.
    The old code checked the DSN's database, found nothing to check there, warned and
    applied: the connector ran and published nothing (the database's publication does
    not cover the schema's table). Now the check runs in the connector's database."""
    database, names = unique("orders"), DbNames(schema=unique("svc"))
    with psycopg.connect(stack.dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
    orders_dsn = make_conninfo(stack.dsn, dbname=database)
    with psycopg.connect(orders_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(names.schema)))
    path, name = spec_file(
        **{"database.dbname": database, "table.include.list": names.outbox_qualified}
    )
    runner = CliRunner()
    migrated = runner.invoke(
        cli,
        ["--dsn", orders_dsn, "--schema", names.schema, "db", "migrate", "--slot",
         name.replace("-", "_")],
    )  # fmt: skip
    assert migrated.exit_code == 0, migrated.output
    refused = runner.invoke(cli, ["apply", str(path)])  # the default DSN: another database
    assert refused.exit_code == 2, refused.output
    assert f"does not cover {names.outbox_qualified}" in refused.output


def test_apply_refuses_a_type_whose_topic_collides_with_one_kafka_has(
    spec_file: Any, stack: Endpoints, service_schema: DbNames
) -> None:
    """Audit 33, case 11: topic-name claims are per schema (0010), Kafka's names per
    cluster. Another service already has topic `<prefix>.Line.<x>`; this schema's type
    `Line_<x>` is accepted by its own outbox, and the old apply ran a connector whose
    task fails when it creates the colliding topic. Now apply refuses it first."""
    path, name = spec_file(
        **{
            "table.include.list": service_schema.outbox_qualified,
            "publication.name": service_schema.publication,
        }
    )
    suffix = unique("x")
    admin = KafkaAdminClient(bootstrap_servers=stack.bootstrap_servers)
    try:
        admin.create_topics([NewTopic(f"{name}.Line.{suffix}", 1, 1)])
    finally:
        admin.close()
    migrate_and_write(stack, service_schema, name.replace("-", "_"), f"Line_{suffix}")
    refused = CliRunner().invoke(cli, ["--schema", service_schema.schema, "apply", str(path)])
    assert refused.exit_code == 2, refused.output
    assert f"{name}.Line_{suffix}" in refused.output
    assert f"{name}.Line.{suffix}" in refused.output
    assert "Traceback" not in refused.output
    doctor = CliRunner().invoke(
        cli, ["--schema", service_schema.schema, "doctor", str(path), "--json"]
    )
    (check,) = [
        c for c in json.loads(doctor.output) if c["name"] == "topic names across the cluster"
    ]
    assert not check["ok"] and f"{name}.Line_{suffix}" in check["detail"]
