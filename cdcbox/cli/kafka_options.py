"""The root `--kafka-*` options: how every Kafka client of `cdc-ctl` authenticates and
encrypts. Each has an environment variable; `--kafka-config` reads a client properties
file, and a flag or variable set as well wins over the file. The password is read from
`--kafka-password-file` or `CDCBOX_KAFKA_PASSWORD`, never from a flag's value (which
would show in `ps`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from cdcbox.kafka.security import MECHANISMS, PROTOCOLS, KafkaSecurity, Secret, read_properties

PASSWORD_ENV = "CDCBOX_KAFKA_PASSWORD"  # noqa: S105 (a variable's name)
_FILE = click.Path(dir_okay=False, path_type=Path)

OPTIONS = [
    click.option(
        "--kafka-config",
        envvar="CDCBOX_KAFKA_CONFIG",
        type=_FILE,
        help="Client properties file (security.protocol, sasl.mechanism, sasl.username, "
        "sasl.password, ssl.ca.location, ssl.certificate.location, ssl.key.location).",
    ),
    click.option(
        "--kafka-security-protocol",
        envvar="CDCBOX_KAFKA_SECURITY_PROTOCOL",
        type=click.Choice(PROTOCOLS, case_sensitive=False),
        help="[default: PLAINTEXT]",
    ),
    click.option(
        "--kafka-sasl-mechanism",
        envvar="CDCBOX_KAFKA_SASL_MECHANISM",
        type=click.Choice(MECHANISMS, case_sensitive=False),
    ),
    click.option("--kafka-username", envvar="CDCBOX_KAFKA_USERNAME", help="SASL user."),
    click.option(
        "--kafka-password-file",
        envvar="CDCBOX_KAFKA_PASSWORD_FILE",
        type=_FILE,
        help=f"SASL password, read from this file (or set {PASSWORD_ENV}).",
    ),
    click.option("--kafka-ca-file", envvar="CDCBOX_KAFKA_CA_FILE", type=_FILE, help="CA (PEM)."),
    click.option(
        "--kafka-cert-file", envvar="CDCBOX_KAFKA_CERT_FILE", type=_FILE, help="Client cert."
    ),
    click.option(
        "--kafka-key-file", envvar="CDCBOX_KAFKA_KEY_FILE", type=_FILE, help="Client key."
    ),
    click.option(
        "--kafka-check-hostname/--kafka-no-check-hostname",
        envvar="CDCBOX_KAFKA_CHECK_HOSTNAME",
        default=None,
        help="Verify the brokers' certificates name their host [default: verify].",
    ),
]


def kafka_security_options(command: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(OPTIONS):
        command = option(command)
    return command


def kafka_security(
    kafka_config: Path | None,
    kafka_security_protocol: str | None,
    kafka_sasl_mechanism: str | None,
    kafka_username: str | None,
    kafka_password_file: Path | None,
    kafka_ca_file: Path | None,
    kafka_cert_file: Path | None,
    kafka_key_file: Path | None,
    kafka_check_hostname: bool | None,
) -> KafkaSecurity:
    """The options over the properties file; `ConfigError` names what does not fit."""
    values = read_properties(kafka_config) if kafka_config else {}
    password = (
        Secret.from_file(kafka_password_file, "--kafka-password-file")
        if kafka_password_file
        else Secret(os.environ[PASSWORD_ENV])
        if os.environ.get(PASSWORD_ENV)
        else None
    )
    flags = {
        "protocol": kafka_security_protocol and kafka_security_protocol.upper(),
        "sasl_mechanism": kafka_sasl_mechanism and kafka_sasl_mechanism.upper(),
        "username": kafka_username,
        "password": password,
        "ca_file": kafka_ca_file,
        "cert_file": kafka_cert_file,
        "key_file": kafka_key_file,
        "check_hostname": kafka_check_hostname,
    }
    values |= {k: v for k, v in flags.items() if v is not None}
    return KafkaSecurity(**values)
