"""One poll batch's way through the consumer: its records through the pipeline, its
commits made durable, then its offsets committed; and its recovery when a part of it
cannot end.

Guarantee: an offset is committed only past records whose transactions committed and
were made durable (the barrier, where commits are asynchronous). Whatever stops a batch
part way (a dead letter that cannot be published, partitions taken by a rebalance, the
database's session replaced or gone) seeks the partitions back to their first record
not ended, so nothing fetched is skipped; what had ended comes again only where its
commits may have died with the session, and the inbox drops those copies.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Literal

import psycopg

from cdcbox.consumer.config import ConsumerConfig
from cdcbox.consumer.keepalive import BatchAbandoned
from cdcbox.consumer.offsets import OffsetCommits
from cdcbox.consumer.pipeline import RecordPipeline
from cdcbox.consumer.stats import ConsumerStats
from cdcbox.consumer.steps.retry import is_service_outage
from cdcbox.db import is_outage
from cdcbox.errors import CdcboxError, SessionChanged
from cdcbox.kafka import client as kafka_client
from cdcbox.kafka.client import TopicPartition
from cdcbox.kafka.dlq import DeadLetterError
from cdcbox.session import Session, SessionSource

log = logging.getLogger("cdcbox.consumer")

Batch = dict[TopicPartition, list[Any]]
# How a unit of the batch (a partition's records, or the whole batch in batch mode) went:
# applied; left for later (a dead letter not published: its partitions were sought back);
# abandoned (a rebalance took its partitions: what ended is still committed); or the
# batch is over (the database's session changed or went away: the batch was rewound).
UnitEnd = Literal["applied", "later", "abandoned", "batch over"]


class PollBatches:
    """The consumer's poll batches, one at a time, on its one database session."""

    def __init__(
        self,
        sessions: SessionSource,
        barrier: Callable[[Session], None] | None,
        offsets: OffsetCommits,
        config: ConsumerConfig,
        stats: ConsumerStats,
        stop: threading.Event,
    ) -> None:
        self.sessions = sessions
        self.barrier = barrier
        self.offsets = offsets
        self.config = config
        self.stats = stats
        self._stop = stop
        self._committed_records = 0  # for FaultSwitches.kill_after_records
        self._outages = 0  # batches in a row the database's absence cut short

    def process(self, kafka: kafka_client.Consumer, pipeline: RecordPipeline, batch: Batch) -> None:
        """The batch's records through `pipeline`, then its offsets (see the module)."""
        started = time.perf_counter()
        try:
            self._guard_session()
        except (CdcboxError, psycopg.Error) as e:
            if not is_outage(e):
                raise
            self._wait_for_database(kafka, pipeline, batch, {}, e)
            return
        if self.config.fault_switches.offsets_before_db_commit:
            kafka.commit({tp: records[-1].offset + 1 for tp, records in batch.items()})
        done: dict[TopicPartition, int] = {}
        for tps, records in self._units(batch):
            end = self._unit(kafka, pipeline, batch, tps, records, done)
            if end == "batch over":
                return
            if end == "abandoned":
                break
            if end == "applied":
                for tp in tps:
                    done[tp] = batch[tp][-1].offset + 1
        self._outages = 0
        self.stats.cycle_part("apply", started)
        if done:
            self.commit_offsets(kafka, batch, done)

    def _units(self, batch: Batch) -> list[tuple[list[TopicPartition], list[Any]]]:
        """A transaction's worth of records each: a partition's, or in batch mode the
        whole poll's (an aggregate keeps to one partition, so order holds)."""
        if self.config.batch_mode:
            return [(list(batch), [record for records in batch.values() for record in records])]
        return [([tp], records) for tp, records in batch.items()]

    def _unit(
        self,
        kafka: kafka_client.Consumer,
        pipeline: RecordPipeline,
        batch: Batch,
        tps: list[TopicPartition],
        records: list[Any],
        done: dict[TopicPartition, int],
    ) -> UnitEnd:
        """One unit through the pipeline; `done` holds each partition's next offset once
        its records ended."""
        try:
            self._apply(pipeline, tps, records, done)
        except DeadLetterError as e:
            # Neither applied nor dead-lettered: commit what ended, come back to the rest.
            log.error("%s; will retry from there", e)
            if self._session_lost():
                self._rewind(kafka, batch, {})
                return "batch over"
            for tp in tps:
                kafka.seek(tp, done.get(tp, batch[tp][0].offset))
            self._stop.wait(self.config.retry.max_delay_s)
            return "later"
        except BatchAbandoned as e:
            # Another member owns those now; what is still ours resumes where it ended.
            log.warning("%s; abandoning the rest of the batch", e)
            self._rewind(kafka, batch, done)
            return "abandoned"
        except SessionChanged as e:
            # Commits of this batch may be gone with the old session's server: the
            # whole batch again, before any later record is applied on a new session.
            log.warning("%s", e)
            self.sessions.unguard()
            self._rewind(kafka, batch, {})
            return "batch over"
        except (CdcboxError, psycopg.Error) as e:
            if not is_service_outage(e):
                raise
            # The database went away outside a record's retries (a parked check, a
            # dead letter's record, an unhandled event's version), or the schema
            # registry while a payload was decoded: nothing of the rest is lost, it
            # comes back. On a guarded session the batch's earlier commits may have
            # died with it: the whole batch comes back.
            ended = {} if self._session_lost() else done
            self._wait_for_database(kafka, pipeline, batch, ended, e)
            return "batch over"
        return "applied"

    def _apply(
        self,
        pipeline: RecordPipeline,
        tps: list[TopicPartition],
        records: list[Any],
        done: dict[TopicPartition, int],
    ) -> None:
        switches = self.config.fault_switches
        if self.config.batch_mode:
            pipeline.process_batch(self.sessions, records)
            self._committed_records += len(records)
            switches.committed(self._committed_records)
            return
        (tp,) = tps

        def ended(record: Any) -> None:
            done[tp] = record.offset + 1
            self._committed_records += 1
            switches.committed(self._committed_records)

        pipeline.process_records(self.sessions, records, ended)

    def commit_offsets(
        self, kafka: kafka_client.Consumer, batch: Batch, done: dict[TopicPartition, int]
    ) -> None:
        """The batch's commits made durable, then its offsets committed up to `done`."""
        started = time.perf_counter()
        try:
            self._make_durable()
        except (CdcboxError, psycopg.Error) as e:
            log.warning(
                "could not confirm the batch's commits are durable (%s); its records "
                "will be processed again (the inbox drops the ones that survived)",
                e,
            )
            self._rewind(kafka, batch, {})
            return
        started = self.stats.cycle_part("durable", started)
        self.offsets.commit(kafka, done)
        self.stats.cycle_part("offsets", started)

    def _wait_for_database(
        self,
        kafka: kafka_client.Consumer,
        pipeline: RecordPipeline,
        batch: Batch,
        done: dict[TopicPartition, int],
        error: BaseException,
    ) -> None:
        """The database went away outside a record's retries (a parked check, a dead
        letter's record, the batch's session): the batch resumes where it ended once it
        is back. Waiting keeps the group membership; partitions revoked meanwhile are
        their next owner's, from the offsets committed so far."""
        self._outages += 1
        self._rewind(kafka, batch, done)
        try:
            pipeline.retry.wait_out_outage(error, self._outages)
        except BatchAbandoned as e:
            log.warning("%s; the batch is the partitions' next owner's", e)

    def _guard_session(self) -> None:
        """Commits of the batch about to run will be asynchronous: keep them on one
        session until the barrier (see `Reconnecting.guard`). Whatever an earlier batch
        left unproven was not offset-committed, so it comes back anyway."""
        self.sessions.unguard()
        if self.config.durable_each_commit or self.config.fault_switches.no_session_check:
            return
        self.sessions.guard()

    def _session_lost(self) -> bool:
        """The guarded session of this batch ended: its asynchronous COMMITs are not
        proven, whichever statement met the end first. The batch is redone whole."""
        lost = self.sessions.guarded and not self.sessions.alive
        if lost:
            log.warning(
                "the database session ended with commits not yet flushed to WAL; the "
                "whole batch is processed again"
            )
            self.sessions.unguard()
        return lost

    def _make_durable(self) -> None:
        """Before offsets are committed: flush the session's asynchronous COMMITs."""
        try:
            switched_off = self.config.fault_switches.no_durability_barrier
            if self.barrier is not None and not switched_off:
                self.barrier(self.sessions())
        finally:
            self.sessions.unguard()

    @staticmethod
    def _rewind(
        kafka: kafka_client.Consumer, batch: Batch, done: dict[TopicPartition, int]
    ) -> None:
        """Seek the batch's partitions that are still assigned back to their first record
        not ended, so nothing fetched is skipped."""
        assigned = kafka.assignment()
        for tp, records in batch.items():
            if tp in assigned:
                kafka.seek(tp, done.get(tp, records[0].offset))
