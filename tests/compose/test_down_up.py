"""`cdc-ctl stack down`, then `cdc-ctl stack up --mode compose`: the volumes keep the
outbox, the replication slot, the topics and every offset (Connect's and the consumer
groups'), so events written before, between and after are each applied once."""

from __future__ import annotations

import psycopg
import pytest
from click.testing import CliRunner

from cdcbox.cli.main import cli
from cdcbox.stack.endpoints import Endpoints
from consumer.compose_demo import applied, await_first_hop, expected, new_run, place_orders
from consumer.fleet import ORDERS

pytestmark = pytest.mark.compose

ORDERS_COUNT = 20


def test_down_then_up_keeps_every_event(containers: Endpoints) -> None:
    before, in_flight, after = new_run(), new_run(), new_run()
    place_orders(containers.dsn, before, ORDERS_COUNT)
    await_first_hop(containers.dsn, before, ORDERS_COUNT, mariadb_dsn=containers.mariadb_dsn)
    # Committed just before `down`, not waited for: some still in the WAL or on the topic.
    place_orders(containers.dsn, in_flight, ORDERS_COUNT)

    down = CliRunner().invoke(cli, ["stack", "down"])
    assert down.exit_code == 0, down.output
    up = CliRunner().invoke(cli, ["stack", "up", "--mode", "compose"])
    assert up.exit_code == 0, up.output
    place_orders(containers.dsn, after, ORDERS_COUNT)
    for run in (before, in_flight, after):
        await_first_hop(containers.dsn, run, ORDERS_COUNT, mariadb_dsn=containers.mariadb_dsn)
        assert applied(containers.dsn, run, containers.mariadb_dsn) == expected(ORDERS_COUNT), run
    with psycopg.connect(ORDERS.dsn(containers.dsn)) as conn:
        slots = conn.execute(
            "SELECT count(*) FROM pg_replication_slots WHERE database = 'orders'"
        ).fetchone()
    assert slots == (1,), "the orders connector's slot survived `down`"
