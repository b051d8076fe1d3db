"""Polling relay configuration; the CLI builds it from flags and the environment."""

from __future__ import annotations

import os
import random
import socket
from dataclasses import dataclass, field

from cdcbox.fault_switches import FaultSwitches
from cdcbox.kafka.client import KafkaSettings
from cdcbox.kafka.security import KafkaSecurity
from cdcbox.limits import EventLimits


def default_worker_id() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


@dataclass(frozen=True)
class RelayBackoff:
    """The backoff: min(300 s, 2^min(n, 8) s) after the n-th failure, jittered."""

    cap_s: float = 300.0
    max_exponent: int = 8
    jitter: float = 0.2

    def delay_s(self, failures: int) -> float:
        base = min(self.cap_s, 2.0 ** min(failures, self.max_exponent))
        return base * random.uniform(1 - self.jitter, 1 + self.jitter)


@dataclass(frozen=True)
class RelayConfig:
    """Everything a `RelayWorker` needs, explicit and frozen. With the defaults a row is
    SENT only after Kafka acknowledged it (acks=all, idempotent producer) and an
    aggregate's rows are published in id order across failures and workers."""

    dsn: str
    bootstrap_servers: str
    # TLS/SASL for every Kafka client it builds (cdc-ctl: the root --kafka-* options).
    kafka_security: KafkaSecurity = field(default_factory=KafkaSecurity)
    worker_id: str = field(default_factory=default_worker_id)
    batch_size: int = 500
    lease_s: float = 30.0
    poll_interval_s: float = 1.0
    max_attempts: int = 10
    backoff: RelayBackoff = field(default_factory=RelayBackoff)
    # Hold an aggregate's later events while an earlier one is unsent (PENDING, PROCESSING,
    # RETRY or DEAD), so per-aggregate order survives failures and several workers.
    ordered: bool = True
    listen: bool = True
    send_timeout_s: float = 30.0
    # How long to try reaching a broker before counting the batch as failed.
    bootstrap_timeout_ms: int = 10_000
    linger_ms: int = 5
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    # The producer's max.request.size follows the outbox's payload limit.
    limits: EventLimits = EventLimits()
    # Test-only (tests/faults): safeguards switched off to show they matter.
    fault_switches: FaultSwitches = field(default_factory=FaultSwitches)

    @property
    def kafka(self) -> KafkaSettings:
        return KafkaSettings(self.bootstrap_servers, security=self.kafka_security)
