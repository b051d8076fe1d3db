"""Every port of the stack is an option, so two stacks run side by side (issue 53,
item 6); a compose build that cannot verify TLS says `--build-ca` in its first line."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from cdcbox.cli.common import Settings
from cdcbox.cli.main import cli
from cdcbox.cli.stack import PORT_OPTIONS, with_stack_config
from cdcbox.stack.compose import up_failure
from cdcbox.stack.config import Ports, StackConfig

pytestmark = pytest.mark.unit

MAVEN = (
    "#12 41.3 [ERROR] Failed to execute goal on project cdcbox-connect: Could not transfer "
    "artifact io.debezium:debezium-core:jar:3.7.1.Final: PKIX path building failed: "
    "unable to find valid certification path to requested target"
)
PIP = "ERROR: Could not install packages due to an OSError: [SSL: CERTIFICATE_VERIFY_FAILED]"


def test_every_port_of_the_stack_but_the_client_ones_has_an_option() -> None:
    named = {field for _, _, field, _ in PORT_OPTIONS}
    derived = {"registry_management", "connect_metrics", "consumer_metrics", "relay_metrics"}
    assert named | derived == set(Ports.__dataclass_fields__)


def test_the_port_options_reach_the_stack_config() -> None:
    seen: list[StackConfig] = []

    @click.command()
    @with_stack_config
    def show(config: StackConfig) -> None:
        seen.append(config)

    flags = [flag for flag, _, _, _ in PORT_OPTIONS]
    argv = [part for i, flag in enumerate(flags) for part in (flag, str(30000 + 10 * i))]
    settings = Settings(dsn=None, bootstrap_servers=None, connect_url=None, connect_auth=None)
    result = CliRunner().invoke(show, argv, obj=settings, standalone_mode=False)
    assert result.exit_code == 0, result.output
    ports = seen[0].ports
    for i, (_, _, field, _) in enumerate(PORT_OPTIONS):
        assert getattr(ports, field) == 30000 + 10 * i
    assert ports.registry_management == ports.registry + 1


@pytest.mark.parametrize("output", [MAVEN, PIP])
def test_a_build_that_cannot_verify_tls_names_build_ca_first(output: str) -> None:
    first, *rest = up_failure(output, "cdcbox", None).splitlines()
    assert "--build-ca /etc/ssl/certs/ca-certificates.crt" in first
    assert rest == [output]
    trusted = up_failure(output, "cdcbox", Path("corp-ca.pem")).splitlines()[0]
    assert "corp-ca.pem" in trusted and "--build-ca" not in trusted


def test_another_compose_failure_points_at_its_logs() -> None:
    first = up_failure("container cdcbox-kafka-1 is unhealthy", "demo", None).splitlines()[0]
    assert first == "docker compose up failed (see `docker compose -p demo logs`)"


def test_stack_up_lists_each_port_option_in_help() -> None:
    text = CliRunner().invoke(cli, ["stack", "up", "--help"], terminal_width=200).output
    for flag, env, _, _ in PORT_OPTIONS:
        assert flag in text and env in text
