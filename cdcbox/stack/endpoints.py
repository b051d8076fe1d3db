"""How clients reach a running stack, as the environment variables `cdc-ctl stack env` prints,
and what `cdc-ctl stack status` reports of each component.

The DSN carries no password (libpq reads PGPASSFILE); the connector's view of the
database (host, port, secrets path as seen by the Connect worker) is separate from the
host's view because under docker compose they differ.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path

from cdcbox.errors import ConfigError
from cdcbox.kafka.security import Secret

ENV_NAMES = {
    "dsn": "CDCBOX_DSN",
    "pgpassfile": "PGPASSFILE",
    "bootstrap_servers": "CDCBOX_BOOTSTRAP_SERVERS",
    "connect_url": "CDCBOX_CONNECT_URL",
    "connect_db_host": "CDCBOX_CONNECT_DB_HOST",
    "connect_db_port": "CDCBOX_CONNECT_DB_PORT",
    "connect_db_name": "CDCBOX_CONNECT_DB_NAME",
    "connect_db_secrets": "CDCBOX_CONNECT_DB_SECRETS",
    "debezium_password_file": "CDCBOX_DEBEZIUM_PASSWORD_FILE",
}


PROMETHEUS_ENV = "CDCBOX_PROMETHEUS_URL"
REGISTRY_ENV = "CDCBOX_REGISTRY_URL"
MARIADB_ENV = "CDCBOX_MARIADB_DSN"
SECURITY_ENV_PREFIXES = (
    "CDCBOX_KAFKA_",
    "CDCBOX_CONNECT_DB_SSL",
    "CDCBOX_CONNECT_USER",
    "CDCBOX_CONNECT_PASSWORD_FILE",
)


@dataclass(frozen=True)
class ComponentStatus:
    """One component of a stack as `cdc-ctl stack status` reports it."""

    name: str
    running: bool
    detail: str


@dataclass(frozen=True)
class Endpoints:
    """Where a running stack answers, as the clients and `stack env` need it (no password:
    files that hold them)."""

    dsn: str
    pgpassfile: str
    bootstrap_servers: str
    connect_url: str
    connect_db_host: str
    connect_db_port: str
    connect_db_name: str
    connect_db_secrets: str
    debezium_password_file: str
    # More variables for a secured stack: the Kafka clients' CDCBOX_KAFKA_* settings, the
    # connector's CDCBOX_CONNECT_DB_SSLMODE and Connect's basic-auth user and password
    # file (paths and names only, never a password).
    security_env: dict[str, str] = field(default_factory=dict)
    # A stack with metrics: its Prometheus (CDCBOX_PROMETHEUS_URL); "" without.
    prometheus_url: str = ""
    # The schema registry's Confluent-compatible API (CDCBOX_REGISTRY_URL); "" without.
    registry_url: str = ""
    # A stack with MariaDB: the `cdcbox` user's DSN (CDCBOX_MARIADB_DSN; its password in
    # the option file it names); "" without.
    mariadb_dsn: str = ""

    def as_env(self) -> dict[str, str]:
        values = {ENV_NAMES[k]: v for k, v in asdict(self).items() if k in ENV_NAMES}
        if self.prometheus_url:
            values[PROMETHEUS_ENV] = self.prometheus_url
        if self.registry_url:
            values[REGISTRY_ENV] = self.registry_url
        if self.mariadb_dsn:
            values[MARIADB_ENV] = self.mariadb_dsn
        return {**values, **self.security_env}

    def connect_auth(self) -> tuple[str, str] | None:
        """Connect's basic-auth credentials on a secured stack (read from the password
        file `security_env` names), None where its REST API is open."""
        user = self.security_env.get("CDCBOX_CONNECT_USER")
        password_file = self.security_env.get("CDCBOX_CONNECT_PASSWORD_FILE")
        if not user or not password_file:
            return None
        return user, Secret.from_file(Path(password_file), "CDCBOX_CONNECT_PASSWORD_FILE").value

    def exports(self) -> str:
        return "".join(f"export {k}={shlex.quote(v)}\n" for k, v in self.as_env().items())

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(asdict(self), indent=2) + "\n")

    @classmethod
    def load(cls, path: Path) -> Endpoints:
        return cls(**json.loads(path.read_text()))

    @classmethod
    def from_env(cls, env: dict[str, str]) -> Endpoints:
        """An already-running stack named by environment variables (all must be set)."""
        missing = [name for name in ENV_NAMES.values() if not env.get(name)]
        if missing:
            raise ConfigError(f"an external stack needs these variables set: {', '.join(missing)}")
        security = {k: v for k, v in env.items() if k.startswith(SECURITY_ENV_PREFIXES)}
        return cls(
            **{k: env[v] for k, v in ENV_NAMES.items()},
            security_env=security,
            prometheus_url=env.get(PROMETHEUS_ENV, ""),
            registry_url=env.get(REGISTRY_ENV, ""),
            mariadb_dsn=env.get(MARIADB_ENV, ""),
        )
