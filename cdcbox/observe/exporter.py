"""The pipeline's own state as Prometheus metrics (`cdc-ctl exporter`): what no single
service can report — the outbox as a whole, replication slots, connector and task
states, and every consumer group's lag.

Guarantee: each scrape is one fresh `read_state` (nothing is cached between scrapes),
and a source that could not be read is reported as `cdcbox_source_up{source} 0` with
its series absent, never as stale values.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from http.server import ThreadingHTTPServer

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from cdcbox.connect.wal_peek import parse_lsn
from cdcbox.observe.pipeline_state import (
    RECENT_S,
    OutboxState,
    PipelineState,
    Sources,
    read_state,
)
from cdcbox.telemetry.build_info import register_build_info
from cdcbox.telemetry.http_metrics import serve


class PipelineCollector(Collector):
    """A Prometheus collector that reads the pipeline's state afresh at every scrape."""

    def __init__(self, sources: Sources) -> None:
        self.sources = sources

    def collect(self) -> Iterator[Metric]:
        return iter(metrics_of(read_state(self.sources), self.sources))


def metrics_of(state: PipelineState, sources: Sources) -> list[Metric]:
    """`state` as metric families (a pure function: the unit tests feed it states). With
    several services, the outbox and inbox families carry a `service` label and each
    database is a source of its own (`postgres/<service>`)."""
    up = GaugeMetricFamily("cdcbox_source_up", "1 when the source was read", labels=["source"])
    configured = [Sources.source_name(d) for d in sources.databases()]
    configured += ["kafka"] if sources.kafka is not None else []
    configured += ["connect"] if sources.connect is not None else []
    for source in configured:
        up.add_metric([source], 0.0 if source in state.errors else 1.0)
    labelled = bool(sources.services)
    read_postgres = any(Sources.source_name(d) not in state.errors for d in sources.databases())
    read_kafka = sources.kafka is not None and "kafka" not in state.errors
    return [
        up,
        *_outbox(state.outboxes, labelled),
        *(_slots(state) if read_postgres else []),
        *_inbox(state, labelled),
        *(_parked(state, labelled) if read_postgres else []),
        *_connectors(state),
        *_lags(state),
        *(_transactions(state) if read_kafka else []),
    ]


def _gauge(name: str, documentation: str, labelled: bool, *labels: str) -> GaugeMetricFamily:
    return GaugeMetricFamily(
        name, documentation, labels=(["service"] if labelled else []) + list(labels)
    )


def _outbox(outboxes: Sequence[OutboxState], labelled: bool) -> list[Metric]:
    if not outboxes:
        return []
    appended = CounterMetricFamily(
        "cdcbox_outbox_appended",
        "Events appended to the outbox (its highest id, which only grows)",
        labels=["service"] if labelled else [],
    )
    rows = _gauge("cdcbox_outbox_rows", "Polling relay rows by state", labelled, "state")
    oldest = _gauge(
        "cdcbox_outbox_oldest_pending_seconds",
        "Age of the oldest row the polling relay has still to send",
        labelled,
    )
    ready = _gauge(
        "cdcbox_outbox_emit_ready",
        "The outbox without a table: 1 while its slot lets producers emit, 0 while they refuse",
        labelled,
    )
    for o in outboxes:
        service = [o.service] if labelled else []
        appended.add_metric(service, o.last_id)
        if o.emit_ready is not None:
            ready.add_metric(service, 1.0 if o.emit_ready else 0.0)
        if o.pending is not None and o.dead is not None:
            rows.add_metric([*service, "pending"], o.pending)
            rows.add_metric([*service, "dead"], o.dead)
        if o.oldest_pending_s is not None:
            oldest.add_metric(service, o.oldest_pending_s)
    return [family for family in (appended, rows, oldest, ready) if family.samples]


def _slots(state: PipelineState) -> list[Metric]:
    retained = GaugeMetricFamily(
        "cdcbox_slot_retained_wal_bytes", "WAL a replication slot holds", labels=["slot"]
    )
    active = GaugeMetricFamily(
        "cdcbox_slot_active", "1 while a client streams from the slot", labels=["slot"]
    )
    confirmed = GaugeMetricFamily(
        "cdcbox_slot_confirmed_lsn",
        "The slot's confirmed position as a byte offset in the WAL: standing still while "
        "cdcbox_slot_unconfirmed_wal_bytes > 0, its connector publishes nothing",
        labels=["slot"],
    )
    unconfirmed = GaugeMetricFamily(
        "cdcbox_slot_unconfirmed_wal_bytes",
        "WAL written after the slot's confirmed position",
        labels=["slot"],
    )
    for slot in state.slots:
        retained.add_metric([slot.name], slot.retained_bytes)
        active.add_metric([slot.name], 1.0 if slot.active else 0.0)
        unconfirmed.add_metric([slot.name], slot.unconfirmed_bytes)
        if slot.confirmed_flush_lsn:
            confirmed.add_metric([slot.name], parse_lsn(slot.confirmed_flush_lsn))
    return [retained, active, confirmed, unconfirmed]


def _inbox(state: PipelineState, labelled: bool) -> list[Metric]:
    size = _gauge(
        "cdcbox_inbox_estimated_rows",
        "Inbox rows as PostgreSQL estimates them (pg_class.reltuples, as of the last VACUUM "
        "or ANALYZE): how large retention lets the inbox grow",
        labelled,
    )
    for estimate in state.inbox_sizes:
        size.add_metric([estimate.service] if labelled else [], estimate.rows)
    inbox = _gauge(
        "cdcbox_inbox_rows",
        "Unfinished inbox rows by consumer and status (FAILED: dead-lettered and held; "
        "RECEIVED: a batch in flight)",
        labelled,
        "consumer",
        "status",
    )
    finished = _gauge(
        "cdcbox_inbox_finished_last_minute",
        f"Inbox rows that reached PROCESSED or SKIPPED in the last {RECENT_S} s, by "
        "consumer and status (the database's view; each consumer counts its own in "
        "cdcbox_consumer_records_total)",
        labelled,
        "consumer",
        "status",
    )
    for count in state.inbox:
        service = [count.service] if labelled else []
        family = finished if count.finished else inbox
        family.add_metric([*service, count.consumer, count.status], count.rows)
    return [size, inbox, finished]


def _parked(state: PipelineState, labelled: bool) -> list[Metric]:
    parked = _gauge(
        "cdcbox_parked_aggregates",
        "Aggregates a consumer holds back behind a dead-lettered event (cdc-ctl parked list)",
        labelled,
        "consumer",
    )
    for count in state.parked:
        service = [count.service] if labelled else []
        parked.add_metric([*service, count.consumer], count.aggregates)
    return [parked]


def _connectors(state: PipelineState) -> list[Metric]:
    if not state.connectors:
        return []
    running = GaugeMetricFamily(
        "cdcbox_connector_running",
        "1 while the connector (task -1) or a task is RUNNING",
        labels=["connector", "task", "state"],
    )
    for c in state.connectors:
        running.add_metric([c.name, "-1", c.state], 1.0 if c.state == "RUNNING" else 0.0)
        for task, task_state in enumerate(c.tasks):
            is_running = 1.0 if task_state == "RUNNING" else 0.0
            running.add_metric([c.name, str(task), task_state], is_running)
    return [running]


def _transactions(state: PipelineState) -> list[Metric]:
    age = GaugeMetricFamily(
        "cdcbox_kafka_open_transaction_seconds",
        "Age of each Kafka transaction open on a partition (it holds back the partition's "
        "read_committed readers: consumers, and Connect's reads of its offsets topic)",
        labels=["topic", "partition", "owner"],
    )
    hanging = GaugeMetricFamily(
        "cdcbox_kafka_hanging_transactions",
        "Open transactions nothing but an abort will end (`cdc-ctl connectors heal`)",
    )
    for t in state.transactions:
        age.add_metric([t.topic, str(t.partition), t.owner], t.age_s)
    hanging.add_metric([], sum(1 for t in state.transactions if t.hanging))
    return [age, hanging]


def _lags(state: PipelineState) -> list[Metric]:
    if not state.lags:
        return []
    lag = GaugeMetricFamily(
        "cdcbox_consumer_group_lag",
        "Records behind the end of the partition, from the group's committed offset",
        labels=["group", "topic", "partition"],
    )
    for p in state.lags:
        lag.add_metric([p.group, p.topic, str(p.partition)], p.lag)
    return [lag]


def serve_exporter(sources: Sources, host: str, port: int) -> ThreadingHTTPServer:
    """Serve /metrics (one reading per scrape), /healthz and /readyz on a daemon thread."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(PipelineCollector(sources))
    register_build_info(registry, "exporter")
    healthy = threading.Event()
    healthy.set()
    return serve(registry, host, port, healthy)
