"""Every mistake a user can make ends in one `error:` line and the documented exit code
(2 usage, 3 unreachable), never a traceback; arguments are checked before any service is
asked anything. Cases that need a running service are in tests/integration and tests/e2e."""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from cdcbox.cli.common import LSN
from cdcbox.cli.main import cli
from cdcbox.errors import StackError
from cdcbox.resources import resource_dir
from cdcbox.stack.compose import ComposeStack
from cdcbox.stack.config import StackConfig
from cdcbox.stack.endpoints import ENV_NAMES, Endpoints
from cdcbox.stack.secrets import StackSecrets
from tests.helpers import free_port


def run(*args: str, env: dict[str, str] | None = None) -> Result:
    clean = {k: None for k in ("CDCBOX_DSN", "CDCBOX_BOOTSTRAP_SERVERS", "CDCBOX_CONNECT_URL")}
    return CliRunner().invoke(cli, list(args), env={**clean, **(env or {})})


def assert_one_line_error(result: Result, code: int, *fragments: str) -> None:
    assert result.exit_code == code, result.output
    assert (
        "Traceback" not in result.output
        and result.exc_info is not None
        and result.exc_info[0] is SystemExit
    )
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    for fragment in fragments:
        assert fragment in lines[0]


def test_a_malformed_dsn_is_a_usage_error() -> None:
    assert_one_line_error(run("--dsn", "notadsn", "outbox", "stats"), 2, "DSN is malformed")


def test_a_connect_url_that_is_not_a_url_is_a_usage_error() -> None:
    result = run("--connect-url", "not-a-url", "connectors", "list")
    assert_one_line_error(result, 2, "'not-a-url' is not an http:// or https:// URL")


def test_unreachable_services_exit_3() -> None:
    port = free_port()
    db = run("--dsn", f"postgresql://cdcbox@127.0.0.1:{port}/x", "outbox", "stats")
    assert_one_line_error(db, 3, "PostgreSQL at", "unreachable")
    connect = run("--connect-url", f"http://127.0.0.1:{port}", "connectors", "list")
    assert_one_line_error(connect, 3, "Kafka Connect at", "unreachable")


def test_a_handler_without_consumer_name_is_refused_before_connecting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "nameless_handlers.py").write_text(
        textwrap.dedent(
            """
            from cdcbox.consumer import Handler

            class Nameless(Handler):
                aggregate_types = ("order",)
                event_types = frozenset({"OrderCreated"})
            """
        )
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    port = free_port()
    result = run(
        "--dsn",
        f"postgresql://cdcbox@127.0.0.1:{port}/x",
        "--bootstrap-servers",
        f"127.0.0.1:{port}",
        "consume",
        "nameless_handlers:Nameless",
    )
    assert_one_line_error(result, 2, "Nameless.consumer_name must be set")
    sys.modules.pop("nameless_handlers", None)


def test_a_schema_with_a_bad_default_fails_the_check_in_one_line(tmp_path: Path) -> None:
    catalogue = tmp_path / "avro"
    catalogue.mkdir()
    for f in resource_dir("schemas").joinpath("avro").iterdir():
        (catalogue / f.name).write_bytes(f.read_bytes())
    v2 = catalogue / "OrderCreated.v2.avsc"
    schema = json.loads(v2.read_text())
    schema["fields"][-1]["default"] = 42  # the field is a string
    v2.write_text(json.dumps(schema))
    result = run("schemas", "check", str(catalogue))
    assert_one_line_error(result, 1, "OrderCreated.v2.avsc: invalid Avro schema")


def test_a_password_file_without_a_password_is_a_usage_error(tmp_path: Path) -> None:
    secrets = tmp_path / "debezium.properties"
    secrets.write_text("user=cdcbox_debezium\n")
    port = free_port()
    result = run(
        "--dsn",
        f"postgresql://cdcbox@127.0.0.1:{port}/x",
        "db",
        "migrate",
        "--debezium-password-file",
        str(secrets),
    )
    assert_one_line_error(result, 2, "has no 'password=' line")


def test_groups_reset_checks_its_target_before_asking_kafka() -> None:
    # Nothing listens on the port: had Kafka been asked first, this would be exit 3.
    result = run(
        "--bootstrap-servers", f"127.0.0.1:{free_port()}", "groups", "reset", "g", "--to", "garbage"
    )
    assert_one_line_error(result, 2, "'garbage'")


def test_a_compose_command_that_outlives_its_timeout_is_a_stack_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A `docker` that never answers stands in for a first `up` still pulling images.
    fake = tmp_path / "bin" / "docker"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\nexec sleep 30\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}:/usr/bin:/bin")
    config = StackConfig(
        state_dir=tmp_path / "state", cache_dir=tmp_path / "cache", infra_dir=tmp_path
    )
    compose = ComposeStack(config, StackSecrets(tmp_path / "secrets"))
    with pytest.raises(StackError, match="did not finish within 1s"):
        compose.run_compose("up", timeout=1)


@pytest.mark.parametrize(
    ("text", "lsn"), [("0/16B3748", 0x16B3748), ("1/8DC972B0", (1 << 32) + 0x8DC972B0), ("42", 42)]
)
def test_an_lsn_is_taken_as_postgresql_writes_it_or_as_an_integer(text: str, lsn: int) -> None:
    assert LSN.convert(text, None, None) == lsn


def test_a_malformed_lsn_is_one_line_naming_the_option() -> None:
    result = CliRunner().invoke(cli, ["offsets", "set", "c", "--lsn", "16B3748/x", "--yes"])
    assert result.exit_code == 2
    assert "Invalid value for '--lsn': '16B3748/x' is not an LSN" in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize("command", ["inbox", "outbox"])
def test_a_purge_rate_that_is_not_positive_is_refused_naming_the_option(command: str) -> None:
    result = run(command, "purge", "--older-than", "30d", "--max-rate", "0", "--yes")
    assert result.exit_code == 2
    assert "Invalid value for '--max-rate'" in result.output
    assert "Traceback" not in result.output


def test_stack_status_as_json_names_each_component_and_exits_1_when_one_is_stopped(
    tmp_path: Path,
) -> None:
    result = CliRunner().invoke(
        cli, ["stack", "status", "--state-dir", str(tmp_path / "none"), "--json"]
    )
    assert result.exit_code == 1
    components = json.loads(result.output)
    assert {c["name"] for c in components} >= {"postgres", "kafka", "connect"}
    assert not any(c["running"] for c in components)


def test_stack_env_for_compose_adds_what_the_compose_file_reads(tmp_path: Path) -> None:
    state = tmp_path / "stack"
    state.mkdir()
    Endpoints.from_env({name: f"value-of-{name}" for name in ENV_NAMES.values()}).save(
        state / "endpoints.json"
    )
    result = CliRunner().invoke(cli, ["stack", "env", "--compose", "--state-dir", str(state)])
    assert result.exit_code == 0, result.output
    exported = dict(
        line.removeprefix("export ").split("=", 1)
        for line in result.output.splitlines()
        if line.startswith("export ")
    )
    assert exported["CDCBOX_DSN"] == "value-of-CDCBOX_DSN"
    assert exported["CDCBOX_SECRETS_DIR"] == str((state / "secrets").resolve())
    assert {"CDCBOX_PG_PORT", "CDCBOX_KAFKA_PORT", "CDCBOX_CONNECT_PORT", "CDCBOX_DATABASE"} <= set(
        exported
    )
    assert "docker compose -p cdcbox --env-file infra/versions.env" in result.output
