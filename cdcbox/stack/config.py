"""Explicit configuration of the local stack and the versions pinned in infra/versions.env."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, get_args

from cdcbox.errors import ConfigError
from cdcbox.limits import EventLimits

# Kafka Connect's exactly.once.source.support: `enabled` commits a source task's records
# and offsets in one transaction; `preparing` is the step of a rolling upgrade.
ExactlyOnce = Literal["enabled", "preparing", "disabled"]


@dataclass(frozen=True)
class StackVersions:
    """Versions both the native runner and docker compose use; one file pins them."""

    kafka: str
    debezium: str
    postgres_major: str
    log4j: str
    slf4j: str
    connect_basic_auth: str
    jmx_exporter: str
    prometheus: str
    grafana: str
    apicurio: str

    @classmethod
    def load(cls, path: Path) -> StackVersions:
        values: dict[str, str] = {}
        for lineno, raw in enumerate(path.read_text().splitlines(), start=1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            match = re.fullmatch(r"([A-Z0-9_]+)=(\S+)", line)
            if not match:
                raise ConfigError(f"{path}:{lineno}: expected NAME=value, got {raw!r}")
            values[match.group(1)] = match.group(2)
        try:
            return cls(
                kafka=values["KAFKA_VERSION"],
                debezium=values["DEBEZIUM_VERSION"],
                postgres_major=values["POSTGRES_MAJOR"],
                log4j=values["LOG4J_VERSION"],
                slf4j=values["SLF4J_VERSION"],
                connect_basic_auth=values["CONNECT_BASIC_AUTH_VERSION"],
                jmx_exporter=values["JMX_EXPORTER_VERSION"],
                prometheus=values["PROMETHEUS_VERSION"],
                grafana=values["GRAFANA_VERSION"],
                apicurio=values["APICURIO_VERSION"],
            )
        except KeyError as e:
            raise ConfigError(f"{path}: missing {e.args[0]}") from e


@dataclass(frozen=True)
class Ports:
    """Loopback ports of the stack; chosen away from the defaults so a system service
    (PostgreSQL on 5432, Kafka on 9092) never collides with ours."""

    postgres: int = 55432
    kafka: int = 59092
    controller: int = 59093
    connect: int = 58083
    # The schema registry's Confluent-compatible API and its management interface (health
    # checks): below the ephemeral range too, as the registry may be restarted late.
    registry: int = 28081
    registry_management: int = 28082
    # MariaDB (`stack up --with-mariadb`), for services whose outbox lives there: below
    # the ephemeral range, as a test session starts it late and fault tests restart it.
    mariadb: int = 23306
    # With --with-metrics: Prometheus, the pipeline exporter, Connect worker j's JMX
    # exporter on connect_metrics + j, and the ports the stack's Prometheus scrapes for
    # consumers (run them with --metrics-port 29100 ... 29104) and relays (29105, 29106).
    prometheus: int = 59090
    exporter: int = 59109
    # The supervisor's /metrics (`stack up`, unless --no-supervisor).
    supervisor: int = 59110
    connect_metrics: int = 58180
    # These two lists lie below Linux's ephemeral range (32768-60999): a service binds its
    # port long after the stack started, and a client socket's local port must not have
    # taken it first (it happened: "Address already in use").
    consumer_metrics: tuple[int, ...] = (29100, 29101, 29102, 29103, 29104)
    relay_metrics: tuple[int, ...] = (29105, 29106)


@dataclass(frozen=True)
class StackConfig:
    """Everything `cdc-ctl stack up` needs; built from flags/environment at the CLI edge.

    `state_dir` holds data, logs, pid files and generated secrets of one stack;
    `cache_dir` holds resolved jars, shared by every stack on the machine.
    """

    state_dir: Path
    cache_dir: Path
    infra_dir: Path
    ports: Ports = field(default_factory=Ports)
    host: str = "127.0.0.1"
    database: str = "cdcbox"
    # A database per service of the demo fleet (consumer/fleet.py, scripts/demo): empty
    # until the demo (or your deploy) migrates them; compose creates the same ones.
    service_databases: tuple[str, ...] = (
        "orders", "inventory", "marketing", "points", "notifications", "search",
    )  # fmt: skip
    kafka_heap_mb: int = 768
    connect_heap_mb: int = 1024
    default_partitions: int = 3
    ready_timeout_s: float = 180.0
    # The broker's message.max.bytes and Connect's producer max.request.size follow it.
    limits: EventLimits = field(default_factory=EventLimits)
    # The production shape on loopback: 3 KRaft nodes (RF 3, min.insync.replicas 2) and
    # 2 Connect workers in one group. Node i listens on kafka + 2i / controller + 2i,
    # worker j on connect + j.
    brokers: int = 1
    connect_workers: int = 1
    # `stack up --secure`: Kafka's listener is SASL_SSL (SCRAM-SHA-512) and PostgreSQL
    # has ssl=on, with a generated CA (cdcbox.stack.tls).
    secure: bool = False
    # `stack up --with-metrics`: Prometheus (Debian's package), the pipeline exporter and
    # the JMX exporter agent in every Connect worker (cdcbox.stack.metrics).
    with_metrics: bool = False
    # PostgreSQL server settings over the stack's own (cdcbox.stack.postgres): a cluster
    # shaped like a managed one, e.g. {"wal_level": "replica"} for a consume-only test.
    postgres_settings: Mapping[str, str] = field(default_factory=dict)
    # Compose only: the project's name (its containers, network and volumes are named
    # after it) and a CA bundle the image builds trust (`stack up --build-ca`), for
    # networks that intercept TLS.
    compose_project: str = "cdcbox"
    build_ca: Path | None = None
    # Every Connect worker's exactly.once.source.support (`stack up --exactly-once`).
    exactly_once: ExactlyOnce = "enabled"
    # The schema registry (Apicurio, cdcbox.stack.registry); `stack up --no-registry`.
    with_registry: bool = True
    # MariaDB from Debian's package (cdcbox.stack.mariadb); `stack up --with-mariadb`.
    with_mariadb: bool = False
    # `cdc-ctl connectors supervise` beside Connect (cdcbox.stack.supervisor); `stack up
    # --no-supervisor` leaves it out.
    with_supervisor: bool = True

    def __post_init__(self) -> None:
        if self.brokers not in (1, 3):
            raise ConfigError(f"--brokers must be 1 or 3 (a KRaft quorum), not {self.brokers}")
        if not 1 <= self.connect_workers <= 4:
            raise ConfigError(f"--connect-workers must be 1 to 4, not {self.connect_workers}")
        if self.exactly_once not in get_args(ExactlyOnce):
            raise ConfigError(
                f"--exactly-once must be one of {', '.join(get_args(ExactlyOnce))}, "
                f"not {self.exactly_once!r}"
            )

    # Heaps that fit a 2-core machine with every process of a cluster on it.
    @property
    def broker_heap_mb(self) -> int:
        return self.kafka_heap_mb if self.brokers == 1 else min(self.kafka_heap_mb, 512)

    @property
    def worker_heap_mb(self) -> int:
        return self.connect_heap_mb if self.connect_workers == 1 else min(self.connect_heap_mb, 768)

    @property
    def replication_factor(self) -> int:
        return min(3, self.brokers)

    @property
    def min_insync_replicas(self) -> int:
        return 2 if self.brokers >= 3 else 1

    def kafka_port(self, node: int) -> int:
        return self.ports.kafka + 2 * node

    def controller_port(self, node: int) -> int:
        return self.ports.controller + 2 * node

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(f"{self.host}:{self.kafka_port(n)}" for n in range(self.brokers))

    @property
    def versions(self) -> StackVersions:
        return StackVersions.load(self.infra_dir / "versions.env")
