"""One polling relay worker: claim a batch, publish it, settle it, wait for more.

The whole batch is sent and flushed (acks=all, idempotent producer) before one UPDATE
marks the acknowledged rows SENT: no row is SENT that Kafka has not acknowledged. A row
that fails goes to RETRY with an exponential backoff, or DEAD after the last attempt (at once
when Kafka refuses it for good, e.g. over max.request.size); its aggregate's later rows in
the batch are not sent after a refused send, and are released (without spending an
attempt) to go out after it, so the last copy a consumer sees of each event is in order.
New events wake the worker through LISTEN/NOTIFY on PostgreSQL, where the poll interval
is only the fallback; on MariaDB (`cdcbox.mariadb.relay_store`) it polls.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import psycopg
from prometheus_client import CollectorRegistry, Counter, Histogram
from psycopg import sql

from cdcbox.databases import database_for
from cdcbox.db import connect
from cdcbox.errors import CdcboxError, KafkaRequestError, ServiceUnavailable
from cdcbox.kafka.client import Producer
from cdcbox.names import DbNames
from cdcbox.relay.config import RelayConfig
from cdcbox.relay.records import to_record
from cdcbox.seam.relay import OutboxRow
from cdcbox.telemetry import tracing
from cdcbox.telemetry.build_info import register_build_info
from cdcbox.telemetry.http_metrics import serve

log = logging.getLogger("cdcbox.relay")


@dataclass
class RelayMetrics:
    """The polling relay's Prometheus metrics, in a registry of its own."""

    registry: CollectorRegistry = field(default_factory=CollectorRegistry)

    def __post_init__(self) -> None:
        r = self.registry
        register_build_info(r, "relay")
        rows = Counter(
            "cdcbox_relay_rows",
            "Rows this worker handled, by outcome: sent (published, marked SENT), failed "
            "(a publish failed, retried later), dead (went DEAD)",
            ["outcome"],
            registry=r,
        )
        self.sent, self.failed, self.dead = (rows.labels(o) for o in ("sent", "failed", "dead"))
        self.batch_seconds = Histogram(
            "cdcbox_relay_batch_duration_seconds", "Claim to settle", registry=r
        )


# Refusals that no retry can change: the row goes DEAD at once, with the reason.
PERMANENT_KINDS = frozenset(
    {"MessageSizeTooLargeError", "RecordListTooLargeError", "InvalidTopicError"}
)


@dataclass(frozen=True)
class Failure:
    """Why a row was not published; `permanent` failures (a record Kafka will never take)
    go DEAD at once instead of being retried."""

    error: str
    permanent: bool = False

    @classmethod
    def of(cls, error: KafkaRequestError | ServiceUnavailable) -> Failure:
        kind = getattr(error, "kind", "")
        return cls(str(error), permanent=kind in PERMANENT_KINDS)


@dataclass
class RelayStats:
    """Counts of one relay worker: rows sent, failed, made dead, batches run."""

    sent: int = 0
    failed: int = 0
    dead: int = 0
    batches: int = 0


class RelayWorker:
    """Publishes outbox rows to Kafka with the wire contract Debezium's router produces.

    Guarantee: a row is marked SENT only after Kafka acknowledged it and while this
    worker still holds its lease, so a row is published at least once and no two
    workers publish it under live leases."""

    def __init__(self, config: RelayConfig, names: DbNames = DbNames()) -> None:
        self.config = config
        self.names = names
        database = database_for(config.dsn)
        self.database = database.relay_store(
            names, lease_check=not self.config.fault_switches.no_relay_lease_check
        )
        self._outages = database.outages
        self.stats = RelayStats()
        self.metrics = RelayMetrics()
        self._stop = threading.Event()
        # Why /readyz says 503: the last claim's database or Kafka failure (None: ready).
        self._unready: str | None = None
        self._listener: psycopg.Connection[Any] | None = None
        self._producer: Producer | None = None

    def stop(self) -> None:
        """Finish the batch in flight, settle it, then return from `run` (signal-safe)."""
        self._stop.set()

    def producer(self) -> Producer:
        if self._producer is None:
            self._producer = Producer(
                self.config.kafka,
                enable_idempotence=True,
                linger_ms=self.config.linger_ms,
                max_request_size=self.config.limits.producer_max_request_size,
                bootstrap_timeout_ms=self.config.bootstrap_timeout_ms,
                client_id=f"cdcbox-relay-{self.config.worker_id}",
            )
        return self._producer

    # --- the loop --------------------------------------------------------------------
    def run(self, *, until_idle: bool = False) -> RelayStats:
        """Relay until stopped (or, with `until_idle`, until a claim finds nothing)."""
        if self._listens and self._listener is None:
            self._listen()
        healthy = threading.Event()
        healthy.set()
        server = None
        if self.config.metrics_port is not None:
            server = serve(
                self.metrics.registry,
                self.config.metrics_host,
                self.config.metrics_port,
                healthy,
                readiness=lambda: self._unready,
            )
        try:
            self.warm_up()
            while not self._stop.is_set():
                try:
                    claimed = self.run_once()
                except self._outages as e:
                    log.error("relay %s: %s; retrying", self.config.worker_id, e)
                    self._unready = f"cannot relay: {_first_line(e)}"
                    self._stop.wait(self.config.poll_interval_s)
                    continue
                self._unready = None
                if claimed >= self.config.batch_size:
                    continue  # more is waiting: no pause
                if until_idle and claimed == 0:
                    break
                self._wait_for_events()
        finally:
            healthy.clear()
            if server is not None:
                server.shutdown()
                server.server_close()
            self.close()
        return self.stats

    def warm_up(self) -> None:
        """Open the database session (refusing an outbox it cannot serve) and connect the
        producer, as `run` does before its first claim (call it earlier to have them
        ready): done by the first batch, every event of that batch waited for them (they
        were the relay's max latency). A database or Kafka unreachable now is the loop's
        to handle, as later."""
        with contextlib.suppress(*self._outages):
            self.database.open(self._listens)
        with contextlib.suppress(ServiceUnavailable):
            self.producer()

    @property
    def _listens(self) -> bool:
        """Woken by NOTIFY: asked for, and the outbox's database has it (MariaDB has
        not: its relay polls every `poll_interval_s`)."""
        return self.config.listen and self.database.notifies

    def run_once(self) -> int:
        """Claim, publish and settle one batch; returns how many rows it claimed."""
        started = time.perf_counter()
        self.database.open(self._listens)
        rows = self.database.claim(
            self.config.worker_id,
            self.config.batch_size,
            self.config.lease_s,
            self.config.ordered,
        )
        if not rows:
            return 0
        try:
            sent, failures, held = self._publish(rows)
        except ServiceUnavailable as e:
            # Kafka is down (or a flush timed out): the batch failed as a whole and backs
            # off like any failure. The producer is dropped with what it still buffers, so
            # no stale copy is sent after the rows' next attempt.
            sent, failures, held = [], {r.id: Failure(str(e)) for r in rows}, []
            self._drop_producer()
        except BaseException:
            self.database.release(self.config.worker_id, [r.id for r in rows])
            raise
        self.stats.sent += self.database.mark_sent(self.config.worker_id, sent)
        if failures:
            self._settle_failures(rows, failures)
        if held:
            self.database.release(self.config.worker_id, held)
        self.stats.batches += 1
        self.metrics.sent.inc(len(sent))
        self.metrics.batch_seconds.observe(time.perf_counter() - started)
        return len(rows)

    def _publish(self, rows: list[OutboxRow]) -> tuple[list[int], dict[int, Failure], list[int]]:
        """Send the batch, flush, and split it: acknowledged ids, failures, held back.

        An aggregate's rows stop at its first failure: a row `send` refuses at once (too
        large) is never overtaken by the aggregate's next row, and rows after one whose
        acknowledgement failed are released to go out after it.
        """
        producer = self.producer()
        futures = []
        failures: dict[int, Failure] = {}
        failed_aggregates: set[tuple[str, str]] = set()
        for row in rows:
            if (row.aggregate_type, row.aggregate_id) in failed_aggregates:
                continue
            record = to_record(row)
            try:
                with tracing.producer_span(
                    topic=record.topic,
                    key=row.aggregate_id,
                    event_id=str(row.event_id),
                    traceparent=row.trace_id or None,
                ):
                    future = producer.send(
                        record.topic,
                        key=record.key,
                        value=record.value,
                        headers=record.headers,
                        timestamp_ms=record.timestamp_ms,
                    )
            except (KafkaRequestError, ServiceUnavailable) as e:
                failures[row.id] = Failure.of(e)
                failed_aggregates.add((row.aggregate_type, row.aggregate_id))
                continue
            futures.append((row, future))
        producer.flush(timeout=self.config.send_timeout_s)
        for row, future in futures:
            try:
                future.get(timeout=self.config.send_timeout_s)
            except (KafkaRequestError, ServiceUnavailable) as e:
                failures[row.id] = Failure.of(e)
                failed_aggregates.add((row.aggregate_type, row.aggregate_id))
        held = [
            r.id
            for r in rows
            if r.id not in failures and (r.aggregate_type, r.aggregate_id) in failed_aggregates
        ]
        sent = [r.id for r in rows if r.id not in failures and r.id not in held]
        return sent, failures, held

    def _settle_failures(self, rows: list[OutboxRow], failures: dict[int, Failure]) -> None:
        by_id = {r.id: r for r in rows}
        plan = [
            (i, self.config.backoff.delay_s(by_id[i].retry_count + 1), f.error, f.permanent)
            for i, f in failures.items()
        ]
        self.database.mark_failed(self.config.worker_id, self.config.max_attempts, plan)
        dead = sum(
            1
            for i, f in failures.items()
            if f.permanent or by_id[i].retry_count + 1 >= self.config.max_attempts
        )
        self.stats.failed += len(failures)
        self.stats.dead += dead
        self.metrics.failed.inc(len(failures))
        self.metrics.dead.inc(dead)
        log.warning(
            "relay %s: %d rows failed (%d dead): %s",
            self.config.worker_id,
            len(failures),
            dead,
            next(iter(failures.values())).error,
        )

    # --- waiting ---------------------------------------------------------------------
    def _listen(self) -> None:
        self._listener = connect(self.config.dsn, autocommit=True)
        self._listener.execute(
            sql.SQL("LISTEN {}").format(sql.Identifier(self.names.notify_channel))
        )

    def _wait_for_events(self) -> None:
        """Block until a NOTIFY arrives or the poll interval passes (the fallback). A
        listening connection that broke (a database restart) is dropped and opened again
        at the next wait; meanwhile the poll interval paces the loop."""
        if self._listener is None and self._listens:
            with contextlib.suppress(psycopg.Error, ServiceUnavailable):
                self._listen()
        if self._listener is None:
            self._stop.wait(self.config.poll_interval_s)
            return
        try:
            for _ in self._listener.notifies(timeout=self.config.poll_interval_s, stop_after=1):
                break
            # Drain the other notifications of the same burst without waiting.
            for _ in self._listener.notifies(timeout=0):
                pass
        except psycopg.Error as e:
            log.warning("relay %s: lost the LISTEN connection (%s)", self.config.worker_id, e)
            self._listener.close()
            self._listener = None
            self._stop.wait(self.config.poll_interval_s)

    def _drop_producer(self) -> None:
        if self._producer is not None:
            with contextlib.suppress(CdcboxError):
                self._producer.close(timeout=0)
            self._producer = None

    def close(self) -> None:
        if self._producer is not None:
            self._producer.close(timeout=10)
            self._producer = None
        self.database.close()
        if self._listener is not None:
            self._listener.close()
            self._listener = None


def _first_line(error: BaseException) -> str:
    lines = str(error).strip().splitlines()
    return lines[0] if lines else type(error).__name__
