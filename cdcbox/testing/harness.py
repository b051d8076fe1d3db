"""An in-process harness for handler tests: events go through the consumer's real
pipeline — decode and route, park gate, retry and breaker, inbox claim, version
guard, the handler, dead letter, batch mode — against a real PostgreSQL, with no Kafka.

The records are built exactly as the relays publish them (`cdcbox.relay.records`), so
a handler sees what it will see in production. Kafka's part is played by `MemoryTopics`:
what the pipeline publishes (dead letters, requeued events) is kept there to inspect.
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from psycopg import sql

from cdcbox.avro import Catalogue
from cdcbox.consumer.breaker import CircuitBreaker
from cdcbox.consumer.config import ConsumerConfig, RetryPolicy
from cdcbox.consumer.dispatch import bind_handlers, dispatch_table
from cdcbox.consumer.handler import BaseHandler
from cdcbox.consumer.pipeline import RecordPipeline
from cdcbox.consumer.stats import ConsumerStats, Outcome
from cdcbox.db import Reconnecting
from cdcbox.kafka.dlq import DeadLetterPublisher
from cdcbox.names import DbNames
from cdcbox.postgres.async_view import async_view
from cdcbox.postgres.database import PostgresDatabase, postgres_stores
from cdcbox.postgres.relay_store import RelayStore
from cdcbox.producer.outbox import NewEvent, event_row
from cdcbox.relay.records import KafkaRecord, to_record
from cdcbox.seam.relay import OutboxRow


@dataclass
class Record:
    """A Kafka record as kafka-python hands it to the consumer."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]
    timestamp: int = 0


class _Sent:
    def get(self, timeout: float | None = None) -> None:
        return None


@dataclass
class MemoryTopics:
    """Stands in for the Kafka producer: every record sent is appended to its topic."""

    records: dict[str, list[Record]] = field(default_factory=dict)

    def send(
        self,
        topic: str,
        key: bytes | None = None,
        value: bytes | None = None,
        headers: list[tuple[str, bytes]] | None = None,
    ) -> _Sent:
        log = self.records.setdefault(topic, [])
        log.append(Record(topic, 0, len(log), key, value, list(headers or [])))
        return _Sent()

    def flush(self, timeout: float | None = None) -> None:
        return None


OCCURRED_AT = "%Y-%m-%dT%H:%M:%S.%fZ"  # strftime's spelling of outbox.ISO_FORMAT

# The harness retries a failing record once, at once: a test should not wait for backoff.
FAST_RETRY = RetryPolicy(max_attempts=2, initial_delay_s=0.0, max_delay_s=0.0)


class Harness:
    """Feed events to `handlers` through the real pipeline on `dsn` (migrated into
    `names.schema`). `send` counts how the events ended; `dead_letters(topic)` is what
    the pipeline dead-lettered. Guarantee: each record meets exactly the statements a
    live consumer sends for it; only Kafka (and its offsets) is absent."""

    def __init__(
        self,
        dsn: str,
        handlers: Sequence[BaseHandler],
        *,
        names: DbNames = DbNames(),
        batch_mode: bool = False,
        schemas: Catalogue | None = None,
        retry: RetryPolicy = FAST_RETRY,
        **config: Any,
    ) -> None:
        self.schemas = schemas
        self._names = names
        self.topics = MemoryTopics()
        self.stats = ConsumerStats()
        self.config = ConsumerConfig(
            bootstrap_servers="in-process",
            dsn=dsn,
            group_id=handlers[0].consumer_name if handlers else "harness",
            batch_mode=batch_mode,
            schemas=schemas,
            retry=retry,
            **config,
        )
        self.connection = Reconnecting(dsn, synchronous_commit=self.config.durable_each_commit)
        database = PostgresDatabase(dsn)
        bind_handlers(handlers, database.outbox(names, schemas, False), async_view)
        self.pipeline = RecordPipeline(
            dispatch_table(handlers),
            postgres_stores(names),
            DeadLetterPublisher(self.topics, self.config.dlq_suffix),
            self.config,
            self.stats,
            CircuitBreaker(self.config.breaker, names),
            sleep=lambda _seconds: None,
        )
        self._offsets: dict[str, itertools.count[int]] = {}
        outbox = names.table("outbox")
        self._outbox_ids = sql.SQL("SELECT id FROM {} WHERE id > %s ORDER BY id").format(outbox)
        self._outbox_start = self._last_outbox_id()

    def record(self, event: NewEvent, *, partition: int = 0) -> Record:
        """`event` as the relays would publish it (its event id fixed once chosen)."""
        row = event_row(event, self.schemas)
        now = datetime.now(UTC).replace(tzinfo=None)
        published = to_record(
            OutboxRow(
                id=0,
                event_id=row.event_id,
                aggregate_type=row.aggregate_type,
                aggregate_id=row.aggregate_id,
                aggregate_version=row.aggregate_version,
                event_type=row.event_type,
                payload=row.payload,
                content_type=row.content_type,
                trace_id=row.trace_id,
                causation_id=row.causation_id,
                created_at=now,
                occurred_at=now.strftime(OCCURRED_AT),
                retry_count=0,
            )
        )
        return self._delivered(published, partition)

    def emitted(self) -> list[Record]:
        """What was appended to the outbox of `names` since the harness started (what its
        handlers emitted with `Handler.emit` and committed), in order, as the relays
        would publish it: feed them to the next service's harness."""
        if self._outbox_start is None:
            return []  # a consume-only database: no outbox, nothing emitted
        conn = self.connection()
        with conn.transaction():
            ids = [row[0] for row in conn.execute(self._outbox_ids, (self._outbox_start,))]
            rows = RelayStore(self._names).rows_by_id(conn, ids)
        return [self._delivered(to_record(rows[i])) for i in ids]

    def _last_outbox_id(self) -> int | None:
        """The outbox's highest id now (0 when empty), None when there is no outbox."""
        conn = self.connection()
        with conn.transaction():
            qualified = f'"{self._names.schema}"."{self._names.outbox}"'
            if conn.execute("SELECT to_regclass(%s)", (qualified,)).fetchone() == (None,):
                return None
            outbox = self._names.table("outbox")
            last = conn.execute(sql.SQL("SELECT max(id) FROM {}").format(outbox)).fetchone()
        return (last[0] if last else None) or 0

    def _delivered(self, published: KafkaRecord, partition: int = 0) -> Record:
        offsets = self._offsets.setdefault(published.topic, itertools.count())
        return Record(
            published.topic,
            partition,
            next(offsets),
            published.key,
            published.value,
            list(published.headers),
            published.timestamp_ms,
        )

    def send(self, *events: NewEvent | Record) -> Counter[Outcome]:
        """The events through the pipeline as one poll batch (in batch mode, one
        transaction, as the consumer runs it); how many ended with each outcome."""
        records = [e if isinstance(e, Record) else self.record(e) for e in events]
        before = Counter(self.stats.outcomes)
        if self.config.batch_mode:
            self.pipeline.process_batch(self.connection, records)
        else:
            for record in records:
                self.pipeline.process(self.connection, record)
        return Counter(self.stats.outcomes) - before

    def dead_letters(self, topic: str) -> list[Record]:
        """What the pipeline dead-lettered from `topic` (the live topic's name)."""
        return self.topics.records.get(topic + self.config.dlq_suffix, [])

    def close(self) -> None:
        self.connection.close()

    def __enter__(self) -> Harness:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
