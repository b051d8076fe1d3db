"""The demo fleet of infra/docker-compose.yml, deployed by the compose file's one-shot
`migrate` (db migrate, apply, the fleet's databases and connectors) and run in its six
containers: exact at every hop, and with a service scaled to three members."""

from __future__ import annotations

import json
import subprocess

import psycopg
import pytest

from cdcbox.kafka.client import Admin, KafkaSettings
from cdcbox.stack.compose import ComposeStack
from cdcbox.stack.endpoints import Endpoints
from consumer.compose_demo import (
    answered,
    applied,
    await_first_hop,
    expected,
    new_run,
    pay_and_read_back,
    place_orders,
)
from consumer.fleet import ORDERS
from tests.helpers import eventually

pytestmark = pytest.mark.compose

ORDERS_COUNT = 40


def test_the_fleet_in_containers_is_exact_at_every_hop(containers: Endpoints) -> None:
    """OrderCreated in the Confluent wire format through the compose file's registry:
    the containers' consumers resolve its id there (CDCBOX_REGISTRY_URL)."""
    run = new_run()
    place_orders(containers.dsn, run, ORDERS_COUNT, registry_url=containers.registry_url)
    with psycopg.connect(ORDERS.dsn(containers.dsn)) as conn:
        framed = conn.execute(
            "SELECT count(*) FROM outbox_event WHERE event_type = 'OrderCreated' "
            "AND aggregate_id LIKE %s AND get_byte(payload, 0) = 0",
            (f"{run}-%",),
        ).fetchone()
    assert framed == (ORDERS_COUNT,)
    await_first_hop(containers.dsn, run, ORDERS_COUNT, mariadb_dsn=containers.mariadb_dsn)
    # Hop 1 (orders → five services, Debezium in the Connect container): each applied
    # each order once; inventory answered each once.
    assert applied(containers.dsn, run, containers.mariadb_dsn) == expected(ORDERS_COUNT)
    trip = pay_and_read_back(containers.dsn, run, ORDERS_COUNT)
    reserved, rejected = trip.answers.get("StockReserved", 0), trip.answers.get("StockRejected", 0)
    assert (reserved + rejected, trip.answered_orders) == (ORDERS_COUNT, ORDERS_COUNT)
    assert reserved and rejected, "the stock runs short for some orders"
    # Hop 2 (inventory → orders) and the payments: a confirmed order is paid, a
    # cancelled one's payment reconciled; nothing applied twice.
    assert (trip.statuses.get("PAID"), trip.reconciled) == (reserved, rejected)
    assert trip.statuses.get("CANCELLED") == rejected
    assert answered(containers.dsn, run) == ORDERS_COUNT


def test_a_service_scaled_to_three_members_shares_its_partitions_exactly(
    containers: Endpoints, compose_stack: ComposeStack
) -> None:
    scaled = compose_stack.run_compose(
        "up", "--detach", "--wait", "--no-recreate", "--scale", "points=3", "points"
    )
    assert scaled.returncode == 0, scaled.stderr
    try:
        admin = Admin(KafkaSettings(bootstrap_servers=containers.bootstrap_servers))
        try:
            eventually(
                lambda: len(admin.group_members("points")) == 3,
                timeout=120,
                what="three members in the group points",
            )
        finally:
            admin.close()
        run = new_run()
        place_orders(containers.dsn, run, ORDERS_COUNT)
        await_first_hop(containers.dsn, run, ORDERS_COUNT, mariadb_dsn=containers.mariadb_dsn)
        assert applied(containers.dsn, run, containers.mariadb_dsn) == expected(ORDERS_COUNT)
    finally:
        back = compose_stack.run_compose(
            "up", "--detach", "--wait", "--scale", "points=1", "points"
        )
        assert back.returncode == 0, back.stderr


def test_only_loopback_is_published(containers: Endpoints, compose_stack: ComposeStack) -> None:
    """Every published port is bound to 127.0.0.1; the rest talk on the project's network."""
    ids = compose_stack.run_compose("ps", "--quiet").stdout.split()
    ports = subprocess.run(
        ["docker", "inspect", "--format", "{{json .NetworkSettings.Ports}}", *ids],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    bindings = [b for line in ports.splitlines() for b in _bindings(line)]
    assert bindings, "postgres, kafka and connect publish a port each"
    assert {host for host, _ in bindings} == {"127.0.0.1"}, bindings


def _bindings(line: str) -> list[tuple[str, str]]:
    ports = json.loads(line) or {}
    return [(b["HostIp"], b["HostPort"]) for spec in ports.values() for b in spec or ()]
