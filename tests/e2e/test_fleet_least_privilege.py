"""The demo fleet on a secured stack of its own (an authorizer on its brokers, exactly-once
on its Connect worker), every service on its own Kafka principal: the principals and
their grants made by `cdc-ctl acls apply connectors/fleet --consumer … --users-dir` as the
bootstrap admin, from the fleet's specs and handlers. Each role then does all it needs
and the fleet is exact at both hops, as on the open stack (`test_fleet.py`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from cdcbox.cli.main import cli
from cdcbox.connect.client import ConnectClient
from cdcbox.consumer import Outcome
from cdcbox.kafka.client import KafkaSettings
from cdcbox.kafka.security import Secret
from cdcbox.resources import resource_dir
from cdcbox.stack import runner
from cdcbox.stack.config import StackConfig
from cdcbox.stack.endpoints import Endpoints
from cdcbox.stack.tls import StackTls
from consumer.fleet import FLEET
from consumer.fleet_kafka import FleetKafka
from consumer.fleet_run import run_fleet
from tests.e2e.conftest import secured_config
from tests.e2e.test_fleet import applied_per_service

pytestmark = pytest.mark.e2e

ORDERS_COUNT = 20


@pytest.fixture(scope="module")
def fleet_stack(
    native_stack: StackConfig, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[StackConfig, Endpoints]]:
    config = secured_config(native_stack, tmp_path_factory.mktemp("secured-fleet"))
    try:
        yield config, runner.up(config, "native")
    finally:
        runner.down(config, purge=True)


def test_the_fleet_on_its_own_principals_is_exact_at_both_hops(
    fleet_stack: tuple[StackConfig, Endpoints],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    config, endpoints = fleet_stack
    tls = StackTls.of(config.state_dir)
    for name, value in endpoints.as_env().items():  # what `stack env` exports
        monkeypatch.setenv(name, value)
    consumers = [
        f"--consumer={s.name}={h.__module__}:{h.__name__}" for s in FLEET for h in s.handlers
    ]
    applied = CliRunner(
        env={
            "CDCBOX_KAFKA_USERNAME": "admin",
            "CDCBOX_KAFKA_PASSWORD_FILE": str(tls.password_file("admin")),
        }
    ).invoke(
        cli,
        [
            "acls",
            "apply",
            str(resource_dir("connectors") / "fleet"),
            *consumers,
            "--users-dir",
            str(tmp_path),
            "--yes",
        ],
    )
    assert applied.exit_code == 0, applied.output
    assert f"created SCRAM user {FLEET[0].name}-consumer" in applied.output
    assert all(Path(tmp_path, f"kafka-{s.name}-consumer.password").exists() for s in FLEET)
    assert (tmp_path / "kafka-orders-relay.password").stat().st_mode & 0o077 == 0

    operator = KafkaSettings(config.bootstrap_servers, security=tls.client("operator"))
    kafka = FleetKafka(
        operator,
        {
            s.name: dataclasses.replace(
                operator.security,
                username=f"{s.name}-consumer",
                password=Secret(
                    Path(tmp_path, f"kafka-{s.name}-consumer.password").read_text().strip()
                ),
            )
            for s in FLEET
        },
    )
    admin_dsn = f"{endpoints.dsn}&passfile={endpoints.pgpassfile}"
    run = run_fleet(
        admin_dsn,
        kafka,
        ORDERS_COUNT,
        2,
        40.0,
        180,
        connect=ConnectClient(endpoints.connect_url, auth=endpoints.connect_auth()),
    )
    n = ORDERS_COUNT
    assert {s for s, c in run.stats.items() if c[Outcome.DEAD_LETTERED]} == set()
    assert applied_per_service(dataclasses.replace(endpoints, dsn=admin_dsn), run.run) == {
        "points": n,
        "notifications": n,
        "search": n,
        "marketing": n // 4,
    }
    reserved, rejected = run.answers["StockReserved"], run.answers["StockRejected"]
    assert (reserved + rejected, run.answered_orders) == (n, n)
    assert (run.statuses["CONFIRMED"], run.statuses["CANCELLED"]) == (reserved, rejected)
    assert (run.final_statuses["PAID"], run.reconciled) == (reserved, rejected)
    assert (run.replay[Outcome.DUPLICATE], run.answers_after_replay) == (n, n)
