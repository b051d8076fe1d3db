"""Kafka TLS/SASL settings: refused when Kafka would refuse them, mapped onto every
kafka-python client, read from a client properties file with flags winning, and the
password never printed."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from cdcbox.cli.common import settings
from cdcbox.cli.main import cli
from cdcbox.errors import ConfigError
from cdcbox.kafka.client import KafkaSettings
from cdcbox.kafka.security import KafkaSecurity, Secret, read_properties


@pytest.fixture
def ca(tmp_path: Path) -> Path:
    path = tmp_path / "ca.pem"
    path.write_text("-----BEGIN CERTIFICATE-----\n")
    return path


def test_sasl_ssl_reaches_every_client_as_kafka_python_options(ca: Path) -> None:
    security = KafkaSecurity(
        protocol="SASL_SSL",
        sasl_mechanism="SCRAM-SHA-512",
        username="svc",
        password=Secret("s3cret"),
        ca_file=ca,
    )
    options = KafkaSettings("b:9093", security=security).options()
    assert options == {
        "bootstrap_servers": "b:9093",
        "request_timeout_ms": 30000,
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "svc",
        "sasl_plain_password": "s3cret",
        "ssl_check_hostname": True,
        "ssl_cafile": str(ca),
    }
    assert "s3cret" not in repr(security) and "s3cret" not in str(security.password)
    assert KafkaSettings("b:9092").options()["security_protocol"] == "PLAINTEXT"


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"protocol": "SASL_SSL", "username": "u", "password": Secret("p")}, "SASL mechanism"),
        ({"protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN"}, "username and a password"),
        ({"protocol": "SSL", "sasl_mechanism": "PLAIN"}, "does not use SASL"),
        ({"protocol": "TLS"}, "is not one of"),
        ({"protocol": "SSL", "cert_file": Path("/nonexistent.pem")}, "go together"),
        ({"protocol": "SSL", "ca_file": Path("/nonexistent/ca.pem")}, "does not exist"),
    ],
)
def test_what_kafka_would_refuse_is_refused_naming_the_setting(
    values: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        KafkaSecurity(**values)  # type: ignore[arg-type]


def test_a_managed_clusters_properties_file_is_read_and_flags_win(tmp_path: Path, ca: Path) -> None:
    config = tmp_path / "client.properties"
    config.write_text(
        "# from the provider's console\n"
        "security.protocol=SASL_SSL\n"
        "sasl.mechanisms=PLAIN\n"
        "sasl.username=key\n"
        "sasl.password=from-file\n"
        f"ssl.ca.location={ca}\n"
        "ssl.endpoint.identification.algorithm=none\n"
    )
    values = read_properties(config)
    assert KafkaSecurity(**values).client_options()["ssl_check_hostname"] is False
    password = tmp_path / "password"
    password.write_text("from-flag-file\n")

    @cli.command("show-kafka")
    def show() -> None:
        import click

        security = settings(click.get_current_context()).kafka_security
        click.echo(f"{security.username} {security.sasl_mechanism} {security.password}")
        assert security.password is not None
        click.echo(security.password.value == "from-flag-file")

    try:
        result = CliRunner().invoke(
            cli,
            [
                "--kafka-config",
                str(config),
                "--kafka-username",
                "other",
                "--kafka-password-file",
                str(password),
                "show-kafka",
            ],
        )
    finally:
        cli.commands.pop("show-kafka")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == ["other PLAIN ***", "True"]


def test_an_unknown_property_is_named_with_its_line(tmp_path: Path) -> None:
    config = tmp_path / "client.properties"
    config.write_text("security.protocol=SSL\nssl.keystore.location=/x.jks\n")
    with pytest.raises(ConfigError, match=r"line 2: unknown setting 'ssl.keystore.location'"):
        read_properties(config)
