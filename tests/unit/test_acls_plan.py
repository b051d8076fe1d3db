"""The grants each role is planned (cdcbox.acls.plan), how a cluster's grants are
reconciled with them, and the demo fleet's plan as the docs show it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from cdcbox.acls.checks import judged
from cdcbox.acls.cluster import reconcile
from cdcbox.acls.derive import fleet_from
from cdcbox.acls.grants import Grant, user
from cdcbox.acls.plan import ConnectRole, ConsumerRole, Fleet, RelayRole, plan
from cdcbox.cli.main import cli
from cdcbox.connect.connectors import load_specs
from cdcbox.resources import resource_dir
from consumer.fleet import FLEET
from tests.unit.test_service_specs import STACK_ENV

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "docs" / "operate" / "acls-plan.json"

FLEET_ROLES = Fleet(
    connect=ConnectRole(connectors=(("shop-outbox", "cdcbox-shop"),), publishes=None),
    relays=(RelayRole("shop", ("outbox.event.cart",)),),
    consumers=(
        ConsumerRole("billing", ("outbox.event.cart",)),
        ConsumerRole("mail", ("outbox.event.user",)),
    ),
)


def held_by(principal: str) -> list[Grant]:
    return [g for g in plan(FLEET_ROLES) if g.principal == user(principal)]


def test_a_consumer_writes_nothing_but_its_own_dead_letters() -> None:
    writes = {g.name for g in held_by("billing-consumer") if g.operation == "WRITE"}
    assert writes == {"outbox.event.cart.dlq"}


def test_a_consumer_reads_only_its_topics_and_joins_only_its_group() -> None:
    grants = held_by("mail-consumer")
    assert {g.name for g in grants if g.resource == "TOPIC" and g.operation == "READ"} == {
        "outbox.event.user",
        "outbox.event.user.dlq",
    }
    assert {g.name for g in grants if g.resource == "GROUP"} == {"mail"}


def test_a_relay_writes_only_the_topics_of_its_aggregates() -> None:
    grants = held_by("shop-relay")
    assert {g.name for g in grants if g.operation == "WRITE"} == {"outbox.event.cart"}
    assert not any(g.operation == "READ" or g.resource == "GROUP" for g in grants)


def test_connect_gets_the_transactional_ids_kip_618_documents() -> None:
    ids = {(g.name, g.pattern) for g in held_by("connect") if g.resource == "TRANSACTIONAL_ID"}
    assert ids == {
        ("connect-cluster-cdcbox-connect", "LITERAL"),
        ("cdcbox-connect-shop-outbox-", "PREFIXED"),
    }


def test_only_the_supervisor_may_abort_transactions_and_nobody_may_change_acls() -> None:
    grants = plan(FLEET_ROLES)
    assert {g.principal for g in grants if g.operation == "CLUSTER_ACTION"} == {user("supervisor")}
    assert not [g for g in grants if g.resource == "CLUSTER" and g.operation == "ALTER"]


def test_reconcile_adds_what_is_missing_and_removes_only_what_cdcbox_created() -> None:
    planned = plan(FLEET_ROLES)
    stale = Grant(user("shop-relay"), "TOPIC", "outbox.event.gone", "WRITE")
    by_hand = Grant(user("mail-consumer"), "TOPIC", "audit", "READ")
    someone_else = Grant(user("analytics"), "TOPIC", "audit", "READ")
    held = [*planned[1:], stale, by_hand, someone_else]
    found = reconcile(planned, held, created=[*planned, stale])
    assert found.missing == [planned[0]]
    assert found.removable == [stale]
    assert found.foreign == [by_hand]  # another principal's grants are not ours to judge
    assert reconcile(planned, planned, planned).matches


def test_the_demo_fleets_plan_is_the_docs_example() -> None:
    """Regenerate with CDCBOX_WRITE_EXAMPLES=1."""
    env = {**os.environ, **STACK_ENV}
    args = ["acls", "plan", str(resource_dir("connectors") / "fleet"), "--json"]
    for service in FLEET:
        for handler in service.handlers:
            args += ["--consumer", f"{service.name}={handler.__module__}:{handler.__name__}"]
    result = CliRunner(env=env).invoke(cli, args)
    assert result.exit_code == 0, result.output
    if os.environ.get("CDCBOX_WRITE_EXAMPLES"):
        EXAMPLE.write_text(result.output)
    assert json.loads(result.output) == json.loads(EXAMPLE.read_text())


def test_the_fleet_derived_from_specs_names_each_services_topics() -> None:
    specs = load_specs(resource_dir("connectors") / "fleet", STACK_ENV)
    fleet = fleet_from(specs, {s.name: s.handlers for s in FLEET})
    assert {r.service: r.topics for r in fleet.relays} == {
        "inventory": ("outbox.event.stock",),
        "orders": ("outbox.event.order", "outbox.event.payment"),
    }
    assert fleet.connect.publishes == (
        "outbox.event.order",
        "outbox.event.payment",
        "outbox.event.stock",
    )


def test_doctor_names_the_principal_the_resource_and_the_operation() -> None:
    planned = plan(FLEET_ROLES)
    lacking, extra = (
        planned[0],
        Grant(user("mail-consumer"), "TOPIC", "outbox.event.", "READ", "PREFIXED"),
    )
    stranger = Grant(user("analytics"), "TOPIC", "audit", "READ")
    checks = judged(reconcile(planned, [*planned[1:], extra, stranger], planned), planned)
    assert [(c.ok, c.name, c.detail) for c in checks] == [
        (False, f"kafka ACLs: {lacking.principal} lacks", lacking.what),
        (False, "kafka ACLs: User:mail-consumer holds more", "READ TOPIC:outbox.event.*"),
    ]
    (fine,) = judged(reconcile(planned, planned, planned), planned)
    assert fine.ok
