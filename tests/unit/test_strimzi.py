"""`cdc-ctl apply --emit strimzi`: every resource it writes for the demo fleet validates
against Strimzi 1.2.0's own CRDs (tests/data/strimzi-1.2.0, their openAPIV3Schema), its
secrets stay Secret references, a bad spec is refused as `apply` refuses it, and the demo
fleet's files are the docs' (generated here)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from click.testing import CliRunner

from cdcbox.cli.main import cli
from cdcbox.resources import resource_dir
from consumer.fleet import FLEET

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT / "tests" / "data" / "strimzi-1.2.0"
DOCS = ROOT / "docs" / "deploy" / "strimzi"
# What a team on Kubernetes sets before emitting: its database's service, the file the
# Debezium password is read from (a Secret of the same stem on Kubernetes).
K8S_ENV = {
    "CDCBOX_CONNECT_DB_HOST": "postgres.cdcbox.svc",
    "CDCBOX_CONNECT_DB_PORT": "5432",
    "CDCBOX_CONNECT_DB_NAME": "cdcbox",
    "CDCBOX_CONNECT_DB_SECRETS": "/secrets/debezium.properties",
    "CDCBOX_CONNECT_DB_SSLMODE": "require",
}
CONSUMERS = [f"--consumer={s.name}={h.__module__}:{h.__name__}" for s in FLEET for h in s.handlers]


def schemas() -> dict[str, dict[str, Any]]:
    found = {}
    for path in CRDS.glob("*-Crd-*.yaml"):
        crd = yaml.safe_load(path.read_text())
        (v1,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
        found[crd["spec"]["names"]["kind"]] = v1["schema"]["openAPIV3Schema"]
    return found


def emitted(*extra: str, env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    args = ["apply", str(resource_dir("connectors") / "fleet"), "--emit", "strimzi", "--json"]
    result = CliRunner(env=env or K8S_ENV).invoke(cli, [*args, *CONSUMERS, *extra])
    assert result.exit_code == 0, result.output
    resources: list[dict[str, Any]] = json.loads(result.output)
    return resources


def test_every_strimzi_resource_validates_against_strimzi_1_2_0s_crds() -> None:
    crds, resources = schemas(), emitted()
    kinds = [r["kind"] for r in resources]
    assert {"KafkaConnect", "KafkaConnector", "KafkaTopic", "KafkaUser"} <= set(kinds)
    for resource in resources:
        if resource["apiVersion"] == "kafka.strimzi.io/v1":
            jsonschema.validate(resource, crds[resource["kind"]])


def test_the_validator_refuses_what_strimzi_would() -> None:
    (connector, *_) = [r for r in emitted() if r["kind"] == "KafkaConnector"]
    connector["spec"]["tasksMax"] = "one"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(connector, schemas()["KafkaConnector"])


def test_secrets_are_references_never_values() -> None:
    resources = emitted()
    text = json.dumps(resources)
    assert "${file:" not in text
    connector = next(r for r in resources if r["kind"] == "KafkaConnector")
    assert connector["spec"]["config"]["database.password"] == (
        "${secrets:cdcbox/cdcbox-debezium:password}"
    )
    role = next(r for r in resources if r["kind"] == "Role")
    assert role["rules"][0]["resourceNames"] == ["cdcbox-debezium"]


def test_each_role_is_a_kafka_user_with_its_planned_acls() -> None:
    users = {r["metadata"]["name"]: r for r in emitted() if r["kind"] == "KafkaUser"}
    assert {"connect", "supervisor", "operator", "orders-relay", "points-consumer"} <= set(users)
    acls = users["marketing-consumer"]["spec"]["authorization"]["acls"]
    writes = {a["resource"]["name"] for a in acls if "Write" in a["operations"]}
    assert writes == {"outbox.event.order.dlq"}


def test_a_bad_spec_is_refused_as_apply_refuses_it(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nconfig:\n  connector.class: C\n  database.hostname: ${NOPE}\n")
    refused = [
        CliRunner(env=K8S_ENV).invoke(cli, ["apply", str(bad), *extra])
        for extra in ([], ["--emit", "strimzi", "--out", str(tmp_path / "out")])
    ]
    assert refused[0].exit_code == refused[1].exit_code != 0
    assert refused[0].output == refused[1].output
    assert refused[0].output.count("\n") == 1 and "NOPE" in refused[0].output
    assert not (tmp_path / "out").exists()


def test_the_demo_fleets_files_are_the_docs() -> None:
    """Regenerate with CDCBOX_WRITE_EXAMPLES=1."""
    if os.environ.get("CDCBOX_WRITE_EXAMPLES"):
        for old in DOCS.glob("*.yaml"):
            old.unlink()
        result = CliRunner(env=K8S_ENV).invoke(
            cli,
            [
                "apply",
                str(resource_dir("connectors") / "fleet"),
                "--emit",
                "strimzi",
                "--out",
                str(DOCS),
                *CONSUMERS,
            ],
        )
        assert result.exit_code == 0, result.output
    shown = {p.name: yaml.safe_load(p.read_text()) for p in DOCS.glob("*.yaml")}
    made = {f"{r['kind'].lower()}-{r['metadata']['name']}.yaml": r for r in emitted()}
    assert shown == made
