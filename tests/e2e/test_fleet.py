"""The demo fleet (consumer/fleet.py, scripts/demo): six services, each on a database of
its own, deployed with the CLI as a team would (`db migrate --service`, a consume-only
`db migrate --only inbox`, `apply connectors/fleet/`), then run: exact at both hops —
every order answered once, every answer applied once, a late payment for a cancelled
order reconciled, a full redelivery to inventory changing and emitting nothing."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml
from click.testing import CliRunner
from psycopg import sql

from cdcbox.cli.main import cli
from cdcbox.connect.client import ConnectClient
from cdcbox.connect.connectors import ConnectorSpec, load_specs
from cdcbox.connect.offsets import delete_forgetting_offsets
from cdcbox.consumer import Outcome
from cdcbox.observe.exporter import metrics_of
from cdcbox.observe.pipeline_state import ServiceDb, Sources, read_state
from cdcbox.resources import resource_dir
from cdcbox.stack.endpoints import Endpoints
from consumer.fleet import FLEET, INVENTORY, ORDERS, fleet_specs, producing_specs
from consumer.fleet_run import run_fleet
from tests.helpers import database_session, drop_slot_once_released, eventually

pytestmark = pytest.mark.e2e

ORDERS_COUNT = 40


def invoke(*args: str) -> Any:
    result = CliRunner().invoke(cli, list(args))
    assert result.exit_code == 0, result.output
    return result


@pytest.fixture
def deployed_fleet(
    stack: Endpoints, connect_client: ConnectClient, mariadb_dsn: str
) -> Iterator[None]:
    """The fleet's databases (`stack up` made them) prepared through the CLI; after the
    test its connectors are deleted and their slots dropped (the databases stay)."""
    with psycopg.connect(stack.dsn) as conn:
        existing = {r[0] for r in conn.execute("SELECT datname FROM pg_database")}
    assert {s.name for s in FLEET} <= existing, "cdc-ctl stack up creates the fleet's databases"
    specs = {spec.service.name: spec for spec in fleet_specs() if spec.service}
    try:
        for service in FLEET:
            if service.produces:
                invoke("db", "migrate", "--service", str(specs[service.name].source))
            else:  # points on MariaDB: the same command
                dsn = service.dsn(stack.dsn, mariadb_dsn)
                invoke("--dsn", dsn, "db", "migrate", "--only", "inbox")
        applied = invoke("apply", str(specs[ORDERS.name].source.parent))
        assert "orders-outbox (service orders)" in applied.output
        yield
    finally:
        for spec in specs.values():
            if connect_client.config(spec.name) is not None:
                delete_forgetting_offsets(connect_client, spec.name)
        with psycopg.connect(stack.dsn, autocommit=True) as conn:
            for spec in specs.values():
                slot = spec.config["slot.name"]

                def released(slot: str = slot) -> bool:
                    row = conn.execute(
                        "SELECT active FROM pg_replication_slots WHERE slot_name = %s", (slot,)
                    ).fetchone()
                    return row is not None and not row[0]

                eventually(
                    released,
                    timeout=60,
                    what=f"slot {slot} released",
                )
                conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))


def test_the_fleet_is_exact_at_both_hops(
    stack: Endpoints, deployed_fleet: None, mariadb_dsn: str
) -> None:
    """Points runs on MariaDB (issue 37): the same handler, its inbox there."""
    run = run_fleet(
        stack.dsn, stack.bootstrap_servers, ORDERS_COUNT, 2, 40.0, 120, mariadb_dsn=mariadb_dsn
    )
    n = ORDERS_COUNT
    reserved, rejected = run.answers["StockReserved"], run.answers["StockRejected"]
    # Hop 1: every service applied every order of the run once, in its own database (the
    # consumers' counts may hold other events of the shared topic: a stack's tests write
    # order events too).
    assert applied_per_service(stack, run.run, mariadb_dsn) == {
        "points": n,
        "notifications": n,
        "search": n,
        "marketing": n // 4,  # every fourth order carries a coupon
    }
    # Inventory answered each order exactly once; orders applied each answer once.
    assert (reserved + rejected, run.answered_orders) == (n, n)
    assert reserved and rejected, "the demo's stock runs short for some orders"
    assert (run.statuses["CONFIRMED"], run.statuses["CANCELLED"]) == (reserved, rejected)
    # Payments: a confirmed order is paid, a cancelled one's payment is reconciled.
    assert (run.final_statuses["PAID"], run.reconciled) == (reserved, rejected)
    # A full redelivery to inventory: every copy dropped by its inbox, no answer again.
    assert (run.replay[Outcome.DUPLICATE], run.answers_after_replay) == (n, n)
    assert len(run.round_trip_ms) == n
    _answers_name_their_orders_as_cause(stack, run.run)
    _stock_is_conserved(stack, run.run)


@pytest.fixture
def inventory_without_a_table(
    stack: Endpoints, connect_client: ConnectClient, tmp_path: Path
) -> Iterator[dict[str, ConnectorSpec]]:
    """The fleet's producing specs with inventory's outbox the one without a table, in a
    schema of its own of inventory's database (its public schema keeps the table outbox
    the other fleet tests migrate); its connector, slot and schema removed after."""
    path = tmp_path / "inventory.yaml"
    base = resource_dir("connectors") / "messages" / "outbox-messages.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "service": {"name": "inventory", "database": "inventory", "schema": "inv_msgs"},
                "base": str(base),
            }
        )
    )
    (spec,) = load_specs(path)
    assert spec.service is not None
    with psycopg.connect(INVENTORY.dsn(stack.dsn), autocommit=True) as conn:
        conn.execute("CREATE SCHEMA IF NOT EXISTS inv_msgs")
    migrated = invoke("db", "migrate", "--service", str(path))  # the mode: the spec's
    assert "messages/0001_emit" in migrated.output
    yield {**producing_specs(), "inventory": spec}
    for name in ("orders-outbox", spec.name):
        if connect_client.config(name) is not None:
            delete_forgetting_offsets(connect_client, name)
    for slot in ("cdcbox_orders", spec.service.slot):
        drop_slot_once_released(stack.dsn, slot)
    with psycopg.connect(INVENTORY.dsn(stack.dsn), autocommit=True) as conn:
        conn.execute("DROP SCHEMA IF EXISTS inv_msgs CASCADE")
        conn.execute(
            sql.SQL("DROP PUBLICATION IF EXISTS {}").format(
                sql.Identifier(spec.service.names.publication)
            )
        )


def test_inventory_on_the_outbox_without_a_table_is_exact_at_both_hops(
    stack: Endpoints, inventory_without_a_table: dict[str, ConnectorSpec]
) -> None:
    """Issue 35: the demo's order flow with inventory answering through logical decoding
    messages (`connectors/messages/`), orders through its table: every hop exact, as
    with both tables, and a full redelivery to inventory emits no answer again."""
    run = run_fleet(
        stack.dsn, stack.bootstrap_servers, ORDERS_COUNT, 2, 40.0, 120, inventory_without_a_table
    )
    n = ORDERS_COUNT
    reserved, rejected = run.answers["StockReserved"], run.answers["StockRejected"]
    assert applied_per_service(stack, run.run)["points"] == n
    assert (reserved + rejected, run.answered_orders) == (n, n)
    assert (run.statuses["CONFIRMED"], run.statuses["CANCELLED"]) == (reserved, rejected)
    assert (run.final_statuses["PAID"], run.reconciled) == (reserved, rejected)
    assert (run.replay[Outcome.DUPLICATE], run.answers_after_replay) == (n, n)
    with psycopg.connect(INVENTORY.dsn(stack.dsn)) as conn:
        rows = conn.execute("SELECT count(*) FROM inv_msgs.outbox_event").fetchone()
    assert rows == (0,)  # no row written: every answer was a message
    _stock_is_conserved(stack, run.run)


def applied_per_service(stack: Endpoints, run: str, mariadb_dsn: str = "") -> dict[str, int]:
    """Each consume-only service's rows for the run's orders, read from its database
    (points' on MariaDB when `mariadb_dsn` is given)."""
    tables = {
        "points": "points_pending",
        "notifications": "notification_outgoing",
        "search": "order_search_index",
        "marketing": "coupon_redemption",
    }
    counts = {}
    by_name = {service.name: service for service in FLEET}
    for name, table in tables.items():
        dsn = by_name[name].dsn(stack.dsn, mariadb_dsn)
        with database_session(dsn) as conn:  # table names are plain: no quoting needed
            row = conn.execute(
                f"SELECT count(*) FROM {table} WHERE order_id LIKE %s", (run + "-%",)
            ).fetchone()
        counts[name] = row[0] if row else 0
    return counts


def _answers_name_their_orders_as_cause(stack: Endpoints, run: str) -> None:
    """Each answer's causation id is its OrderCreated's event id, from the other
    database; the trace id is carried along."""
    like = (run + "-%",)
    with psycopg.connect(ORDERS.dsn(stack.dsn)) as conn:
        created: dict[Any, Any] = dict(
            conn.execute(
                "SELECT aggregate_id, event_id::text FROM outbox_event "
                "WHERE event_type = 'OrderCreated' AND aggregate_id LIKE %s",
                like,
            ).fetchall()
        )
    with psycopg.connect(INVENTORY.dsn(stack.dsn)) as conn:
        causes: dict[Any, Any] = dict(
            conn.execute(
                "SELECT aggregate_id, causation_id FROM outbox_event WHERE aggregate_id LIKE %s",
                like,
            ).fetchall()
        )
    assert causes == created


def _stock_is_conserved(stack: Endpoints, run: str) -> None:
    """What the shelf lost is what the run's reservations hold (stock is re-filled per run)."""
    with psycopg.connect(INVENTORY.dsn(stack.dsn)) as conn:
        reserved, booked = conn.execute(
            "SELECT (SELECT sum(reserved) FROM stock), (SELECT sum(quantity) "
            "FROM inventory_reservation WHERE order_id LIKE %s)",
            (run + "-%",),
        ).fetchone()  # type: ignore[misc]
    assert reserved == booked


def test_the_cli_reports_each_service_of_the_fleet(stack: Endpoints, deployed_fleet: None) -> None:
    """`doctor` and `diff` over connectors/fleet/ check each service's own database and
    say which service each line is about; a consume-only database holds no publication
    and no slot."""
    fleet_dir = str(fleet_specs()[0].source.parent)
    doctor = CliRunner().invoke(cli, ["doctor", fleet_dir, "--json"])
    rows = json.loads(doctor.output)
    by_service: dict[str, dict[str, bool]] = {}
    for row in rows:
        by_service.setdefault(row["service"], {})[row["name"]] = row["ok"]
    assert by_service["orders"]["publication"] and by_service["inventory"]["publication"]
    assert by_service["orders"]["connector slot"] and by_service["inventory"]["connector slot"]
    assert doctor.exit_code == 0, doctor.output
    assert "in sync" in invoke("diff", fleet_dir).output
    diffs = json.loads(invoke("diff", fleet_dir, "--json").output)
    assert {(d["service"], d["in_sync"]) for d in diffs} == {("orders", True), ("inventory", True)}
    with psycopg.connect(stack.dsn) as conn:
        slot_databases = {r[0] for r in conn.execute("SELECT database FROM pg_replication_slots")}
    for service in FLEET:
        with psycopg.connect(service.dsn(stack.dsn)) as conn:
            publications = conn.execute("SELECT count(*) FROM pg_publication").fetchone()
        assert (publications == (1,)) is service.produces, service.name
        assert (service.name in slot_databases) is service.produces, service.name


def test_top_and_the_exporter_read_every_service_and_name_it(
    stack: Endpoints, deployed_fleet: None
) -> None:
    """`--service NAME` reads that database of the cluster: a producing service's outbox,
    a consume-only service's inbox (it has no outbox, and that is not an error), each
    line named; the slot status names each slot's database."""
    run_fleet(stack.dsn, stack.bootstrap_servers, 4, 1, 0.0, 120)
    names = ("orders", "inventory", "points")
    by_name = {service.name: service for service in FLEET}
    sources = Sources(services=tuple(ServiceDb(n, by_name[n].dsn(stack.dsn)) for n in names))
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in metrics_of(read_state(sources), sources)
        for sample in family.samples
    }
    for name in names:
        assert samples[("cdcbox_source_up", (("source", f"postgres/{name}"),))] == 1.0
    outboxes = {labels for metric, labels in samples if metric == "cdcbox_outbox_appended_total"}
    assert outboxes == {(("service", "orders"),), (("service", "inventory"),)}
    inbox_services = {
        dict(labels)["service"]
        for metric, labels in samples
        if metric == "cdcbox_inbox_estimated_rows"
    }
    assert inbox_services == set(names)
    top = invoke("top", "--once", "--interval", "0.2", *(f"--service={n}" for n in names))
    rows = [line.replace("│", " ").split() for line in top.output.splitlines()]
    assert {"orders", "inventory"} <= {row[0] for row in rows if len(row) > 1}
    assert ["points", "points-service"] in [row[:2] for row in rows]
    slots = json.loads(invoke("slot", "status", "--json").output)
    assert {s["name"]: s["database"] for s in slots}["cdcbox_inventory"] == "inventory"
