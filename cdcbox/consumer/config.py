"""Consumer configuration as explicit, frozen dataclasses; the CLI builds them from flags."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Literal

from cdcbox import wire
from cdcbox.avro import Catalogue
from cdcbox.consumer.breaker import BreakerPolicy
from cdcbox.fault_switches import FaultSwitches
from cdcbox.kafka.client import KafkaSettings
from cdcbox.kafka.security import KafkaSecurity
from cdcbox.limits import EventLimits

Unhandled = Literal["skip", "dead-letter"]
GapPolicy = Literal["apply", "hold"]


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter; the partition waits while a record retries."""

    max_attempts: int = 5
    initial_delay_s: float = 0.1
    max_delay_s: float = 10.0
    multiplier: float = 2.0

    def delay(self, attempt: int) -> float:
        """Delay before retry number `attempt` (1-based)."""
        ceiling = min(self.max_delay_s, self.initial_delay_s * self.multiplier ** (attempt - 1))
        return random.uniform(ceiling / 2, ceiling)


@dataclass(frozen=True)
class ConsumerConfig:
    """Everything a `Consumer` needs, explicit and frozen; `cdc-ctl consume` builds it from
    flags and environment variables. The defaults are the safe ones: per-record
    transactions, parking on, gaps applied, the breaker on."""

    bootstrap_servers: str
    dsn: str
    group_id: str
    # TLS/SASL for every Kafka client it builds (cdc-ctl: the root --kafka-* options).
    kafka_security: KafkaSecurity = field(default_factory=KafkaSecurity)
    # A consumer name runs in one group (its inbox and parking are one state); True
    # rebinds the names to `group_id` instead of refusing to start.
    move_to_group: bool = False
    # The outbox's limits (cdc-ctl: --max-payload-bytes): its dead-letter producer takes
    # records this large, or as large as its topics take, whichever is larger.
    limits: EventLimits = field(default_factory=EventLimits)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    dlq_suffix: str = wire.DLQ_SUFFIX
    unhandled: Unhandled = "skip"
    # A version gap (v3 after v1): apply it, or hold (retry until v2 arrives, then DLQ).
    gap_policy: GapPolicy = "apply"
    # Once an aggregate has a dead-lettered event, send its later events after it.
    park_aggregates: bool = True
    parked_refresh_s: float = 5.0
    # One transaction per poll batch (savepoint per record) instead of one per record.
    batch_mode: bool = False
    # False (the default): a transaction's COMMIT returns before its WAL is flushed, and
    # one synchronous commit before each offset commit makes them all durable (a crash
    # can only lose commits whose offsets Kafka has not been told). True: every COMMIT
    # waits for its own flush, as PostgreSQL's default does (~0.2 ms per record here).
    durable_each_commit: bool = False
    breaker: BreakerPolicy = field(default_factory=BreakerPolicy)
    # Serve /metrics and /healthz on this port (None: no HTTP endpoint).
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    # The Avro schema catalogue (schemas/avro) for decoding Avro payloads.
    schemas: Catalogue | None = None
    # The outbox `Handler.emit` writes to without a table (`cdcbox.producer.messages`):
    # set it when this service's database was migrated with `--relay messages`.
    emit_messages: bool = False
    auto_offset_reset: Literal["earliest", "latest"] = "earliest"
    # Latency: the broker answers a fetch as soon as data arrives or after this wait.
    fetch_max_wait_ms: int = 50
    max_poll_records: int = 500
    poll_timeout_ms: int = 200
    client_id: str = "cdcbox-consumer"
    # Group timing. A member that dies is noticed after session_timeout_ms: 10 s fails its
    # partitions over in seconds (kafka-python's 45 s left them idle for most of a minute).
    # Heartbeats come from a background thread, every heartbeat_interval_ms (a third of
    # the session, as Kafka advises). Retry waits keep polling (`keepalive`), so only one
    # handler call or one poll batch without retries must fit in max_poll_interval_ms.
    session_timeout_ms: int = 10_000
    heartbeat_interval_ms: int = 3_000
    max_poll_interval_ms: int = 300_000
    # CDC creates a topic with its first event; create it up front so the subscription
    # sees it at once, and refresh metadata often enough to notice new partitions.
    create_missing_topics: bool = True
    metadata_max_age_ms: int = 30_000
    # Test-only (tests/faults): safeguards switched off to show they matter.
    fault_switches: FaultSwitches = field(default_factory=FaultSwitches)

    @property
    def kafka(self) -> KafkaSettings:
        return KafkaSettings(self.bootstrap_servers, security=self.kafka_security)
