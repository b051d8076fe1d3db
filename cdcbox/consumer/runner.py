"""The consumer: its start (handlers bound, Kafka opened, readiness served) and its loop
(poll, hand each batch to `cdcbox.consumer.poll_batch`, which runs it through the
pipeline and commits its offsets).

Offsets are committed only after the records' transactions committed (auto-commit is
off), once per poll batch and before the next poll (cdcbox.consumer.offsets: a commit
refused by a rebalance or not answered by the broker never stops the consumer).
kafka-python 3 may finish a group join on its IO thread after `poll` returned: the
assignment listener leaves all database work to the consumer's thread.
Handlers are validated before the first poll: a duplicate consumer name or a handler
without topics or event types fails at start-up, not at the first record. Several
handlers may take one event type: each applies it under its own consumer name.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence

import psycopg

from cdcbox.consumer.breaker import CircuitBreaker
from cdcbox.consumer.config import ConsumerConfig
from cdcbox.consumer.dispatch import bind_handlers, dispatch_table
from cdcbox.consumer.handler import BaseHandler
from cdcbox.consumer.keepalive import GroupKeepAlive
from cdcbox.consumer.offsets import OffsetCommits
from cdcbox.consumer.pipeline import RecordPipeline
from cdcbox.consumer.poll_batch import PollBatches
from cdcbox.consumer.stats import ConsumerStats
from cdcbox.databases import database_for
from cdcbox.errors import CdcboxError
from cdcbox.kafka import client as kafka_client
from cdcbox.kafka.client import Producer, TopicPartition
from cdcbox.kafka.dlq import DeadLetterPublisher
from cdcbox.kafka.topics import ensure_topics, prepare_dead_letters
from cdcbox.names import DbNames
from cdcbox.telemetry.http_metrics import serve

log = logging.getLogger("cdcbox.consumer")


class Consumer:
    """Runs handlers over their topics; `run()` until `stop()` or a limit is reached."""

    def __init__(
        self, handlers: Sequence[BaseHandler], config: ConsumerConfig, names: DbNames = DbNames()
    ) -> None:
        self.handlers = list(handlers)
        self.config = config
        self.stats = ConsumerStats()
        self._dispatch = dispatch_table(self.handlers)
        database = database_for(config.dsn)
        self.database = database.consumer_state(names, config.durable_each_commit)
        outbox = database.outbox(names, config.schemas, config.emit_messages)
        bind_handlers(self.handlers, outbox, self.database.async_view)
        self._stop = threading.Event()
        self._healthy = threading.Event()
        self._reload_parked = threading.Event()  # set by the assignment listener
        self._offsets = OffsetCommits()
        self.connection = self.database.sessions
        self._batches = PollBatches(
            self.connection, self.database.barrier, self._offsets, config, self.stats, self._stop
        )
        self._names = names
        self._stores = self.database.stores
        self._kafka: kafka_client.Consumer | None = None
        self._producer: Producer | None = None
        self._breaker: CircuitBreaker | None = None

    @property
    def topics(self) -> list[str]:
        return sorted({t for h in self.handlers for t in h.subscribed_topics()})

    @property
    def consumer_names(self) -> list[str]:
        return [h.consumer_name for h in self.handlers]

    def assigned(self) -> bool:
        """True once the group gave this consumer partitions (for callers that wait)."""
        return bool(self.assignment())

    def assignment(self) -> set[TopicPartition]:
        """The partitions the group gives this consumer now (empty before it joined)."""
        kafka = self._kafka
        return set(kafka.assignment()) if kafka is not None else set()

    def stop(self) -> None:
        """Ask the loop to finish the in-flight batch, commit and return (signal-safe)."""
        self._stop.set()

    def _open_kafka(self) -> tuple[kafka_client.Consumer, Producer]:
        c = self.config
        consumer = kafka_client.Consumer(
            c.kafka,
            strict_offsets=True,
            group_id=c.group_id,
            client_id=c.client_id,
            auto_offset_reset=c.auto_offset_reset,
            fetch_max_wait_ms=c.fetch_max_wait_ms,
            max_poll_records=c.max_poll_records,
            metadata_max_age_ms=c.metadata_max_age_ms,
            session_timeout_ms=c.session_timeout_ms,
            heartbeat_interval_ms=c.heartbeat_interval_ms,
            max_poll_interval_ms=c.max_poll_interval_ms,
        )
        if c.create_missing_topics:
            ensure_topics(c.kafka, self.topics)
            consumer.await_partitions(self.topics)
        producer = Producer(
            c.kafka,
            client_id=c.client_id + "-dlq",
            linger_ms=0,
            max_request_size=prepare_dead_letters(
                c.kafka, self.topics, c.limits, c.dlq_suffix, c.create_missing_topics
            ),
        )
        consumer.subscribe(self.topics, on_assigned=self._on_assigned)
        return consumer, producer

    def _not_ready(self) -> str | None:
        """Readiness (/readyz): partitions assigned, the database answering, no record
        held by an open breaker. Runs on the HTTP thread: its own short connection."""
        if not self.assigned():
            return "no partitions assigned"
        if self._breaker is not None and any(
            self._breaker.is_open(name) for name in self.consumer_names
        ):
            return "circuit breaker open: records held back"
        return self.database.ping()

    def _on_assigned(self, partitions: set[TopicPartition]) -> None:
        """A new assignment may bring aggregates another member parked a moment ago: the
        cache no longer counts (every record asks the database) until the consumer's
        loop reloads it. This runs on kafka-python's IO thread, possibly while the
        consumer's thread is inside a record's transaction: it only sets flags, and
        never touches the database session (an async handler's view of that session
        has a lock of its own, so a second thread's statement would interleave with
        the handler's on one libpq connection)."""
        self.stats.metrics.assignments.inc()
        self._offsets.reassigned()
        if self.config.park_aggregates:
            self._stores.parking.invalidate()
            self._reload_parked.set()

    def run(
        self, *, max_records: int | None = None, idle_timeout_s: float | None = None
    ) -> ConsumerStats:
        """Consume until stopped, until `max_records` ended, or after `idle_timeout_s` of
        nothing to do; returns the outcome counts."""
        self._stores.bindings.bind(
            self.connection(), self.consumer_names, self.config.group_id, self.config.move_to_group
        )
        kafka, producer = self._open_kafka()
        self._kafka, self._producer = kafka, producer
        self._breaker = CircuitBreaker(self.config.breaker, self._names, self._stores.breaker)
        pipeline = RecordPipeline(
            self._dispatch,
            self._stores,
            DeadLetterPublisher(producer, self.config.dlq_suffix),
            self.config,
            self.stats,
            self._breaker,
            sleep=GroupKeepAlive(kafka, self._stop).sleep,
            owned_partitions=lambda: {(tp.topic, tp.partition) for tp in kafka.assignment()},
        )
        server = None
        if self.config.metrics_port is not None:
            server = serve(
                self.stats.metrics.registry,
                self.config.metrics_host,
                self.config.metrics_port,
                self._healthy,
                self._not_ready,
            )
        self._healthy.set()
        last_activity = refreshed = time.monotonic()
        self._refresh_parked()
        try:
            while not self._stop.is_set():
                if max_records is not None and self.stats.total >= max_records:
                    break
                if time.monotonic() - refreshed > self.config.parked_refresh_s:
                    self._try_refresh_parked()
                    refreshed = time.monotonic()
                # Only a retry wait pauses partitions, and kafka-python keeps a partition's
                # paused flag through a rebalance that leaves it assigned: one a wait
                # paused while the group moved under it would never be fetched again.
                kafka.resume(kafka.assignment())
                polled = time.perf_counter()
                batch = kafka.poll(timeout_ms=self.config.poll_timeout_ms)
                if self._reload_parked.is_set():  # an assignment since the last poll
                    self._reload_parked.clear()
                    self._try_refresh_parked()
                if not batch:
                    self._offsets.retry(kafka)
                    idle = time.monotonic() - last_activity
                    if idle_timeout_s is not None and idle > idle_timeout_s:
                        break
                    continue
                last_activity = time.monotonic()
                self.stats.cycle_part("poll", polled)
                self._batches.process(kafka, pipeline, batch)
        finally:
            self._healthy.clear()
            if server is not None:
                server.shutdown()
                server.server_close()
            self.close()
        return self.stats

    def _try_refresh_parked(self) -> None:
        """`_refresh_parked`, surviving a database that went away (its session killed, a
        restart): until a reload succeeds the stale cache does not count, and each
        record asks the database, through a reconnected session, whether it is parked."""
        try:
            self._refresh_parked()
        except (CdcboxError, psycopg.Error) as e:
            self._stores.parking.invalidate()
            log.warning("could not reload the parked aggregates (%s); asking the database", e)

    def _refresh_parked(self) -> None:
        """Re-read the parked aggregates now and then, so a park made elsewhere is seen."""
        if self.config.park_aggregates:
            conn = self.connection()
            with conn.transaction():
                self._stores.parking.refresh(conn, self.consumer_names)

    def close(self) -> None:
        if self._kafka is not None:
            self._kafka.close(autocommit=False)
            self._kafka = None
        if self._producer is not None:
            self._producer.close(timeout=10)
            self._producer = None
        self.connection.close()
