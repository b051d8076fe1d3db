"""Service specs (`service:` + `base:`): each service's connector gets names derived from
its name and schema that no other service can share, over what the environment says;
two specs that would share a slot, publication, table, topic prefix or connector are
refused naming both files (no services)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
import yaml

from cdcbox.connect.connectors import load_specs, render
from cdcbox.errors import SpecError
from cdcbox.resources import resource_dir
from tests.unit.test_connector_specs import ENV

BASE = resource_dir("connectors") / "outbox-postgres.yaml"
# What `cdc-ctl stack env` sets for the shared database: a service spec must win over it.
STACK_ENV = {
    **ENV,
    "CDCBOX_CONNECTOR_NAME": "cdcbox-outbox",
    "CDCBOX_SLOT_NAME": "cdcbox_outbox",
    "CDCBOX_OUTBOX_TABLE": "public.outbox_event",
}


@pytest.fixture
def specs_dir(tmp_path: Path) -> Path:
    shutil.copy(BASE, tmp_path / "base.yaml.in")
    (tmp_path / "fleet").mkdir()
    return tmp_path / "fleet"


def service_spec(directory: Path, file: str, body: str) -> Path:
    path = directory / file
    path.write_text(body + "base: ../base.yaml.in\n")
    return path


def test_a_service_spec_derives_every_name_that_must_differ(specs_dir: Path) -> None:
    path = service_spec(
        specs_dir, "billing.yaml", "service:\n  name: billing\n  database: billing_db\n"
    )
    spec = render(path, STACK_ENV)
    config = spec.config
    assert spec.name == "billing-outbox"
    assert spec.label == "billing-outbox (service billing)"
    assert config["slot.name"] == "cdcbox_billing"
    assert config["topic.prefix"] == "cdcbox-billing"
    assert config["database.dbname"] == "billing_db"
    assert config["publication.name"] == "cdcbox_outbox"  # the public schema's, per database
    assert config["table.include.list"] == "public.outbox_event"
    # The rest is the base spec as the environment renders it.
    assert config["database.hostname"] == "db.internal"
    assert config["transforms.outbox.type"].endswith("EventRouter")


def test_a_schema_per_service_gets_that_schemas_table_and_publication(specs_dir: Path) -> None:
    path = service_spec(specs_dir, "svc2.yaml", "service:\n  name: svc2\n  schema: svc2\n")
    config = render(path, STACK_ENV).config
    assert config["table.include.list"] == "svc2.outbox_event"
    assert config["publication.name"] == "cdcbox_outbox_svc2"
    assert config["database.dbname"] == "shop"  # no database named: the environment's


def test_overrides_apply_on_top_of_the_base(specs_dir: Path) -> None:
    path = service_spec(
        specs_dir, "a.yaml", "service:\n  name: a\nconfig:\n  poll.interval.ms: 100\n"
    )
    assert render(path, STACK_ENV).config["poll.interval.ms"] == "100"


def test_services_of_one_directory_load_together(specs_dir: Path) -> None:
    service_spec(specs_dir, "a.yaml", "service:\n  name: a\n  database: a\n")
    service_spec(specs_dir, "b.yaml", "service:\n  name: b\n  database: b\n")
    assert [s.name for s in load_specs(specs_dir, STACK_ENV)] == ["a-outbox", "b-outbox"]


@pytest.mark.parametrize(
    ("second", "shared"),
    [
        ("service:\n  name: a\n  database: other\n", "connector name"),
        # One database, one schema: the same table and publication.
        ("service:\n  name: b\n  database: a\n", "publication"),
    ],
)
def test_two_services_that_would_collide_are_refused_naming_both(
    specs_dir: Path, second: str, shared: str
) -> None:
    service_spec(specs_dir, "a.yaml", "service:\n  name: a\n  database: a\n")
    service_spec(specs_dir, "b.yaml", second)
    with pytest.raises(SpecError, match=rf"b.yaml and .*a.yaml share the {shared}"):
        load_specs(specs_dir, STACK_ENV)


def test_two_plain_specs_on_one_slot_are_refused(tmp_path: Path) -> None:
    for name in ("one", "two"):
        (tmp_path / f"{name}.yaml").write_text(
            f"name: {name}\nconfig:\n  connector.class: C\n  slot.name: shared\n"
            f"  topic.prefix: {name}\n  table.include.list: public.{name}\n"
        )
    with pytest.raises(SpecError, match="share the replication slot 'shared'"):
        load_specs(tmp_path, {})


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("service:\n  name: Bad-Name\n", "service.name 'Bad-Name' must be lower-case"),
        ("service:\n  name: a\n  schema: Bad\n", "service.schema: database name schema='Bad'"),
        ("service:\n  name: a\n  color: blue\n", "service is a mapping with 'name'"),
    ],
)
def test_a_bad_service_block_is_one_clear_error(specs_dir: Path, body: str, message: str) -> None:
    with pytest.raises(SpecError, match=message):
        render(service_spec(specs_dir, "x.yaml", body), STACK_ENV)


def test_the_shipped_fleet_specs_render_without_collisions() -> None:
    specs = load_specs(resource_dir("connectors") / "fleet", STACK_ENV)
    assert {(s.service.name, s.config["database.dbname"]) for s in specs if s.service} == {
        ("orders", "orders"),
        ("inventory", "inventory"),
    }


def test_the_docs_service_spec_is_the_shipped_one() -> None:
    """The topologies page shows connectors/fleet/orders.yaml as it is (comments aside)."""
    readme = (resource_dir("connectors").parent / "docs/concepts/topologies.md").read_text()
    (block,) = re.findall(r"```yaml\n(# connectors/fleet/orders.yaml\n.*?)```", readme, re.S)
    shipped = resource_dir("connectors") / "fleet" / "orders.yaml"
    assert yaml.safe_load(block) == yaml.safe_load(shipped.read_text())
