"""Prometheus metrics of one consumer, in a registry of its own (no process globals);
`cdcbox.telemetry.http_metrics` serves them."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from cdcbox.telemetry.build_info import register_build_info


class ConsumerMetrics:
    """The consumer's Prometheus metrics, in a registry of its own (one per `Consumer`)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        register_build_info(self.registry, "consumer")
        self.records = Counter(
            "cdcbox_consumer_records",
            "Records by outcome",
            ["consumer", "outcome"],
            registry=self.registry,
        )
        self.retries = Counter(
            "cdcbox_consumer_retries", "Handler retries", ["consumer"], registry=self.registry
        )
        self.failures = Counter(
            "cdcbox_consumer_failures",
            "Handler failures (attempts)",
            ["consumer"],
            registry=self.registry,
        )
        self.handler_seconds = Histogram(
            "cdcbox_consumer_handler_duration_seconds",
            "Time in the handler's transaction",
            ["consumer"],
            registry=self.registry,
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
        )
        self.lag_seconds = Histogram(
            "cdcbox_consumer_commit_to_handle_duration_seconds",
            "From occurred_at to handled",
            ["consumer"],
            registry=self.registry,
            buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60),
        )
        self.cycle_seconds = Histogram(
            "cdcbox_consumer_poll_cycle_duration_seconds",
            "A poll cycle that brought records, by part: poll (until the records were in "
            "hand), apply (their transactions), durable (the durability barrier), offsets "
            "(the offset commit)",
            ["part"],
            registry=self.registry,
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5),
        )
        self.breaker_open = Gauge(
            "cdcbox_consumer_circuit_open",
            "1 while the circuit breaker holds this process's records back",
            ["consumer"],
            registry=self.registry,
        )
        self.database_up = Gauge(
            "cdcbox_consumer_database_up",
            "0 while the consumer waits for its database to come back, else 1",
            registry=self.registry,
        )
        self.database_up.set(1)
        self.outage_waits = Counter(
            "cdcbox_consumer_database_outage_waits",
            "Backoff waits for an unreachable database (the record in flight is kept)",
            registry=self.registry,
        )
        self.registry_outage_waits = Counter(
            "cdcbox_consumer_registry_outage_waits",
            "Backoff waits for an unreachable schema registry (the record in flight is kept)",
            registry=self.registry,
        )
        self.assignments = Counter(
            "cdcbox_consumer_assignments",
            "Partition assignments received: one per rebalance this process took part in",
            registry=self.registry,
        )
