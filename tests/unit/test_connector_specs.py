"""Connector specs: rendering, secret checks, redaction and diffing (no services)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cdcbox.connect.client import check_connector_name
from cdcbox.connect.connectors import REDACTED, diff, load_specs, redact, render
from cdcbox.errors import SpecError, UsageError
from cdcbox.limits import EventLimits
from cdcbox.ops.limit_checks import connector_limit_check
from cdcbox.resources import resource_dir

ENV = {
    "CDCBOX_CONNECT_DB_HOST": "db.internal",
    "CDCBOX_CONNECT_DB_PORT": "5432",
    "CDCBOX_CONNECT_DB_NAME": "shop",
    "CDCBOX_CONNECT_DB_SECRETS": "/run/secrets/db.properties",
}


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(text)
    return path


def test_shipped_spec_renders_with_the_outbox_router_and_a_placeholder_password() -> None:
    (spec,) = load_specs(resource_dir("connectors"), env=ENV)
    config = spec.config
    assert spec.name == "cdcbox-outbox"
    assert config["database.hostname"] == "db.internal"
    assert config["database.password"] == "${file:/run/secrets/db.properties:password}"
    assert config["plugin.name"] == "pgoutput"
    assert config["snapshot.mode"] == "no_data"
    assert config["skipped.operations"] == "u,d,t"
    assert config["tombstones.on.delete"] == "false"
    assert config["transforms.outbox.type"] == "io.debezium.transforms.outbox.EventRouter"
    # Connect's own ${routedByValue} is not an environment variable: it passes through.
    assert config["transforms.outbox.route.topic.replacement"] == "outbox.event.${routedByValue}"
    assert config["key.converter"].endswith("StringConverter")
    assert config["tasks.max"] == "1"


def test_missing_variable_names_the_key_and_the_variable(tmp_path: Path) -> None:
    path = write(tmp_path, "name: x\nconfig:\n  connector.class: C\n  database.hostname: ${NOPE}\n")
    with pytest.raises(SpecError, match=r"database.hostname uses \$\{NOPE\}"):
        render(path, {})


def test_default_applies_when_the_variable_is_unset(tmp_path: Path) -> None:
    path = write(tmp_path, "name: ${N:-fallback}\nconfig:\n  connector.class: C\n")
    assert render(path, {}).name == "fallback"
    assert render(path, {"N": "given"}).name == "given"


def test_literal_secret_is_refused_and_not_echoed(tmp_path: Path) -> None:
    path = write(tmp_path, "name: x\nconfig:\n  connector.class: C\n  database.password: s3cret\n")
    with pytest.raises(SpecError) as excinfo:
        render(path, {})
    assert "database.password" in str(excinfo.value)
    assert "s3cret" not in str(excinfo.value)


def test_spec_shape_is_checked(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="exactly 'name' and 'config'"):
        render(write(tmp_path, "name: x\nconfig: {}\nextra: 1\n"), {})
    with pytest.raises(SpecError, match="connector.class"):
        render(write(tmp_path, "name: x\nconfig:\n  tasks.max: 1\n"), {})


def test_redact_masks_literal_secrets_but_shows_placeholders() -> None:
    shown = redact(
        {"database.password": "plain", "sasl.jaas.config": "${file:/a:b}", "database.user": "u"}
    )
    assert shown == {
        "database.password": REDACTED,
        "sasl.jaas.config": "${file:/a:b}",
        "database.user": "u",
    }


def test_diff_reports_added_removed_changed_and_ignores_name() -> None:
    change = diff({"name": "x", "a": "1", "b": "2"}, {"a": "1", "b": "3", "c": "4"})
    assert change.added == {"c": "4"}
    assert change.removed == {}
    assert change.changed == {"b": ("2", "3")}
    assert not change.empty
    assert diff({"name": "x", "a": "1"}, {"a": "1"}).empty
    new = diff(None, {"a": "1"})
    assert not new.empty and new.lines()[0] == "(new connector)"


def test_diff_lines_never_show_a_literal_secret() -> None:
    change = diff({"database.password": "old-secret"}, {"database.password": "new-secret"})
    text = "\n".join(change.lines())
    assert "old-secret" not in text and "new-secret" not in text
    assert REDACTED in text


def test_doctor_checks_the_connector_takes_the_largest_outbox_record() -> None:
    (spec,) = load_specs(resource_dir("connectors"), env=ENV)
    assert connector_limit_check(spec, EventLimits()).ok  # the defaults fit Kafka's
    raised = connector_limit_check(spec, EventLimits(2_000_000))
    assert not raised.ok
    assert "producer.override.max.request.size >= 2016384" in raised.fix
    spec.config["producer.override.max.request.size"] = "2100000"
    assert connector_limit_check(spec, EventLimits(2_000_000)).ok


@pytest.mark.parametrize("name", ["../connector-plugins", "a b", "", "-x", "x/y", "é"])
def test_connector_names_that_are_not_safe_everywhere_are_refused(
    tmp_path: Path, name: str
) -> None:
    with pytest.raises(UsageError, match="connector name"):
        check_connector_name(name)
    path = write(tmp_path, f"name: '{name}'\nconfig:\n  connector.class: X\n")
    with pytest.raises(SpecError, match="connector name"):
        load_specs(path, env=ENV)


def test_an_inline_pem_key_is_a_secret() -> None:
    """Audit 33, case 15: `ssl.keystore.key` (a PEM private key inline) was printed by
    `diff` as it was."""
    pem = "-----BEGIN PRIVATE KEY-----\nMIIE...\n-----END PRIVATE KEY-----"
    assert redact({"ssl.keystore.key": pem})["ssl.keystore.key"] == REDACTED
    assert (
        redact({"consumer.override.ssl.key.password": "x"})["consumer.override.ssl.key.password"]
        == REDACTED
    )


def test_a_spec_that_is_not_yaml_is_refused_in_one_line(tmp_path: Path) -> None:
    """A YAML syntax error names the file, the line and the column, on one line (it
    printed PyYAML's eight-line report before)."""
    path = write(tmp_path, "name: x\nconfig: {connector.class: C, database.hostname: ${NOPE}}\n")
    with pytest.raises(SpecError) as refused:
        load_specs(path, ENV)
    message = str(refused.value)
    assert "\n" not in message
    assert f"{path}: cannot read connector spec" in message and "line 2" in message
