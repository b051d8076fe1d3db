"""Every command renders a spec the same way (issue 52, item 1): right after `apply`,
`diff` finds the live connector in sync and `doctor` passes the spec's checks, for each
shipped spec, with and without `--schema`, with no variable set by hand. Before, only
`apply` filled the message prefix and publication from `--schema`, so `diff` reported
the connector it had just applied as differing and `doctor` failed it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

import psycopg
import pytest
from click.testing import CliRunner
from psycopg import sql

from cdcbox.cli.main import cli
from cdcbox.connect.client import ConnectClient
from cdcbox.names import DbNames
from cdcbox.resources import resource_dir
from cdcbox.stack.endpoints import Endpoints
from tests.helpers import drop_slot_once_released, unique

pytestmark = pytest.mark.e2e


@dataclass(frozen=True)
class Case:
    spec: str
    schema: bool
    relay: str  # how the schema is migrated: cdc (the table) or messages


CASES = [
    Case("outbox-postgres.yaml", schema=False, relay="cdc"),
    Case("outbox-postgres.yaml", schema=True, relay="cdc"),
    Case("messages/outbox-messages.yaml", schema=True, relay="messages"),
]


@pytest.fixture
def applied(
    request: pytest.FixtureRequest, stack: Endpoints, connect_client: ConnectClient
) -> Iterator[tuple[list[str], dict[str, str]]]:
    """The case's shipped spec applied as a connector of its own (name, slot and topic
    prefix from the environment, as a user sets them); the global flags and environment
    every later command gets."""
    case: Case = request.param
    name = unique("render")
    slot = name.replace("-", "_")
    env = {"CDCBOX_CONNECTOR_NAME": name, "CDCBOX_SLOT_NAME": slot, "CDCBOX_TOPIC_PREFIX": name}
    flags: list[str] = []
    names = DbNames(schema=unique("render")) if case.schema else DbNames()
    if case.schema:
        flags = ["--schema", names.schema]
        with psycopg.connect(stack.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(names.schema)))
    runner = CliRunner(env=env)
    migrate = [*flags, "db", "migrate", "--slot", slot]
    if case.relay == "messages":
        migrate += ["--relay", "messages"]
    migrated = runner.invoke(cli, migrate)
    assert migrated.exit_code == 0, migrated.output
    spec = str(resource_dir("connectors") / case.spec)
    done = runner.invoke(cli, [*flags, "apply", spec])
    assert done.exit_code == 0, done.output
    try:
        yield [*flags], {**env, "SPEC": spec}
    finally:
        connect_client.delete(name)
        drop_slot_once_released(stack.dsn, slot)
        if case.schema:
            with psycopg.connect(stack.dsn, autocommit=True) as conn:
                conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(names.schema)))
                conn.execute(
                    sql.SQL("DROP PUBLICATION IF EXISTS {}").format(
                        sql.Identifier(names.publication)
                    )
                )


@pytest.mark.parametrize(
    "applied", CASES, indirect=True, ids=[f"{c.spec}{' --schema' * c.schema}" for c in CASES]
)
def test_diff_and_doctor_see_the_connector_apply_made(
    applied: tuple[list[str], dict[str, str]],
) -> None:
    flags, env = applied
    runner = CliRunner(env=env)
    diff = runner.invoke(cli, [*flags, "diff", env["SPEC"]])
    assert diff.exit_code == 0, diff.output
    assert diff.output.strip() == f"{env['CDCBOX_CONNECTOR_NAME']}: in sync"

    doctor = runner.invoke(cli, [*flags, "doctor", env["SPEC"], "--json", "--stuck-after", "0"])
    failed = [c for c in json.loads(doctor.output) if not c["ok"]]
    assert failed == []
