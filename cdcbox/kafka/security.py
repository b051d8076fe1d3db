"""How cdcbox's Kafka clients authenticate and encrypt: security protocol, SASL
mechanism and credentials, CA, client certificate and key, hostname verification.

One frozen `KafkaSecurity` travels inside `KafkaSettings` to every client the adapter
builds (consumer, producer, admin: the consumer framework, the relay, dead letters and
`cdc-ctl`). It is read from flags, environment variables or a client properties file
with the keys managed Kafka services hand out (`security.protocol`, `sasl.mechanism`,
`sasl.username`, `sasl.password`, `ssl.ca.location`, `ssl.certificate.location`,
`ssl.key.location`, `ssl.endpoint.identification.algorithm`). The password is a
`Secret`: its repr and str never show it, so it cannot reach a log line or an error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, cast, get_args

from cdcbox.errors import ConfigError

Protocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
Mechanism = Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
PROTOCOLS: tuple[str, ...] = get_args(Protocol)
MECHANISMS: tuple[str, ...] = get_args(Mechanism)


@dataclass(frozen=True)
class Secret:
    """A value that prints as `***`."""

    value: str = field(repr=False)

    def __repr__(self) -> str:
        return "Secret('***')"

    def __str__(self) -> str:
        return "***"

    @classmethod
    def from_file(cls, path: Path, what: str) -> Secret:
        try:
            return cls(path.read_text().strip())
        except OSError as e:
            raise ConfigError(f"{what}: cannot read {path}: {e.strerror}") from e


@dataclass(frozen=True)
class KafkaSecurity:
    """Guarantee: a combination Kafka would refuse (SASL without credentials, a client
    key without its certificate, a file that does not exist) is refused here, naming
    the setting, before any connection is tried."""

    protocol: Protocol = "PLAINTEXT"
    sasl_mechanism: Mechanism | None = None
    username: str | None = None
    password: Secret | None = None
    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    check_hostname: bool = True

    def __post_init__(self) -> None:
        if self.protocol not in PROTOCOLS:
            raise ConfigError(
                f"Kafka security protocol {self.protocol!r} is not one of {', '.join(PROTOCOLS)}"
            )
        if self.sasl_mechanism is not None and self.sasl_mechanism not in MECHANISMS:
            raise ConfigError(
                f"Kafka SASL mechanism {self.sasl_mechanism!r} is not one of "
                f"{', '.join(MECHANISMS)}"
            )
        if self.sasl:
            if self.sasl_mechanism is None:
                raise ConfigError(f"Kafka security protocol {self.protocol} needs a SASL mechanism")
            if not self.username or self.password is None:
                raise ConfigError(
                    f"Kafka security protocol {self.protocol} needs a username and a password"
                )
        elif self.sasl_mechanism is not None:
            raise ConfigError(
                f"a Kafka SASL mechanism is set but the security protocol {self.protocol} "
                "does not use SASL"
            )
        if (self.cert_file is None) != (self.key_file is None):
            raise ConfigError("a Kafka client certificate and its key go together: set both")
        for name in ("ca_file", "cert_file", "key_file"):
            path = getattr(self, name)
            if path is not None and not Path(path).is_file():
                raise ConfigError(f"Kafka {name.replace('_', ' ')} {path} does not exist")

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    def client_options(self) -> dict[str, Any]:
        """kafka-python's keyword arguments for these settings."""
        options: dict[str, Any] = {"security_protocol": self.protocol}
        if self.sasl:
            assert self.password is not None
            options |= {
                "sasl_mechanism": self.sasl_mechanism,
                "sasl_plain_username": self.username,
                "sasl_plain_password": self.password.value,
            }
        if self.tls:
            options["ssl_check_hostname"] = self.check_hostname
            if self.ca_file is not None:
                options["ssl_cafile"] = str(self.ca_file)
            if self.cert_file is not None:
                options |= {"ssl_certfile": str(self.cert_file), "ssl_keyfile": str(self.key_file)}
        return options


def read_properties(path: Path) -> dict[str, Any]:
    """`KafkaSecurity` field values from a client properties file (`key=value` lines,
    `#` comments); merge flags over them, then build `KafkaSecurity(**values)`."""
    try:
        lines = path.read_text().splitlines()
    except OSError as e:
        raise ConfigError(f"Kafka config {path}: {e.strerror}") from e
    values: dict[str, Any] = {}
    for number, line in enumerate(lines, start=1):
        text = line.strip()
        if not text or text.startswith(("#", "!")):
            continue
        key, sep, value = text.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or key not in _PROPERTIES:
            raise ConfigError(
                f"Kafka config {path}, line {number}: unknown setting {key!r} "
                f"(known: {', '.join(sorted(_PROPERTIES))})"
            )
        name, convert = _PROPERTIES[key]
        values[name] = convert(value)
    return values


def _hostname_check(value: str) -> bool:
    return value.lower() != "none" and value != ""


_PROPERTIES: dict[str, tuple[str, Any]] = {
    "security.protocol": ("protocol", lambda v: cast(Protocol, v.upper())),
    "sasl.mechanism": ("sasl_mechanism", lambda v: cast(Mechanism, v.upper())),
    "sasl.mechanisms": ("sasl_mechanism", lambda v: cast(Mechanism, v.upper())),
    "sasl.username": ("username", str),
    "sasl.password": ("password", Secret),
    "ssl.ca.location": ("ca_file", Path),
    "ssl.certificate.location": ("cert_file", Path),
    "ssl.key.location": ("key_file", Path),
    "ssl.endpoint.identification.algorithm": ("check_hostname", _hostname_check),
}
