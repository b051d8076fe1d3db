"""Kafka transactions left open on a partition, found and aborted (KIP-664).

A transaction open on a partition holds back every `read_committed` reader of it from
the transaction's first offset on: cdcbox's consumers, and Connect's own reads of its
offsets topic under exactly-once (a task then waits forever in `readToEnd`). The broker
ends a transaction its producer abandoned only after `transaction.timeout.ms`; one its
coordinator has lost (a hanging transaction) it never ends.

`open_transactions` asks each partition's leader which producers have a transaction
open there (DescribeProducers), then each transaction coordinator what it knows of them
(ListTransactions, DescribeTransactions), as `kafka-transactions.sh find-hanging` does.
`abort` writes the abort marker with the coordinator epoch the partition last saw for
the producer (0 when it saw none), as `kafka-transactions.sh abort` does (kafka-python's
default is -1: accepted here for a producer that had completed no transaction on the
partition, never tried for one that had).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import kafka
from kafka.admin._transactions import AbortTransactionSpec

from cdcbox.kafka.client import Admin, TopicPartition

__all__ = ["OpenTransaction", "TransactionAdmin"]

# Coordinator states in which a transaction still holds partitions open.
_OPEN_STATES = frozenset({"Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence"})
# The partition and the coordinator are asked one after the other: a transaction that
# ends (and a next one that begins) in between looks, to that one reading, as if its
# coordinator had let it go. Aborting it then could abort the producer's next
# transaction on the partition. So a transaction counts as hanging only once its
# producer has written nothing to the partition for this long: no race spans it.
HANG_AFTER_IDLE_S = 60.0


@dataclass(frozen=True)
class OpenTransaction:
    """One producer's transaction open on one partition, as its leader and its
    coordinator see it. `transactional_id` is None when no coordinator knows the
    producer: nothing will ever end that transaction but an abort."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    first_offset: int
    last_write_ms: int
    transactional_id: str | None = None
    coordinator_state: str | None = None
    coordinator_epoch_of_producer: int | None = None
    started_ms: int | None = None
    timeout_ms: int | None = None
    coordinator_has_partition: bool = False

    @property
    def where(self) -> str:
        return f"{self.topic}-{self.partition}"

    def age_s(self, now_ms: int) -> float:
        """Seconds since it began (the coordinator's start time, or else the producer's
        last write to this partition)."""
        return max(0.0, (now_ms - (self.started_ms or self.last_write_ms)) / 1000)

    def idle_s(self, now_ms: int) -> float:
        """Seconds since its producer last wrote to this partition."""
        return max(0.0, (now_ms - self.last_write_ms) / 1000)

    def hanging(self, now_ms: int) -> str | None:
        """Why nothing but an abort will end it, or None while its coordinator still
        will (by a commit, an abort, or the transaction's own timeout), or while its
        producer wrote to the partition less than `HANG_AFTER_IDLE_S` ago."""
        if self.idle_s(now_ms) < HANG_AFTER_IDLE_S:
            return None
        if self.transactional_id is None:
            return "no coordinator knows its producer"
        if self.coordinator_state not in _OPEN_STATES:
            return f"its coordinator has it {self.coordinator_state}"
        if self.coordinator_epoch_of_producer != self.producer_epoch:
            return (
                f"its coordinator is at producer epoch {self.coordinator_epoch_of_producer}, "
                f"the partition at {self.producer_epoch}"
            )
        if not self.coordinator_has_partition:
            return "its coordinator does not count this partition in it"
        if self.timeout_ms is not None and self.age_s(now_ms) * 1000 > self.timeout_ms + 60_000:
            return f"open past its own {self.timeout_ms // 1000} s timeout"
        return None

    def describe(self, now_ms: int) -> str:
        owner = self.transactional_id or f"producer {self.producer_id}"
        return (
            f"{owner} holds {self.where} open from offset {self.first_offset} for "
            f"{self.age_s(now_ms):.0f} s (last write {self.idle_s(now_ms):.0f} s ago)"
        )


class TransactionAdmin(Admin):
    """The admin client with the transaction calls: reads reduced to `OpenTransaction`,
    and the abort marker written with the right coordinator epoch."""

    def open_transactions(self, topics: Iterable[str]) -> list[OpenTransaction]:
        """Every transaction open on a partition of `topics` (those that exist)."""
        wanted = sorted(set(topics) & self.list_topics())
        partitions = [
            TopicPartition(topic, p)
            for topic, count in self.partition_counts(wanted).items()
            for p in range(count)
        ]
        if not partitions:
            return []
        states = self._call("describe producers", self._client.describe_producers, partitions)
        found = [
            OpenTransaction(
                topic=tp.topic,
                partition=tp.partition,
                producer_id=p.producer_id,
                producer_epoch=p.producer_epoch,
                coordinator_epoch=p.coordinator_epoch,
                first_offset=p.current_transaction_start_offset,
                last_write_ms=p.last_timestamp,
            )
            for tp, state in states.items()
            for p in state.active_producers
            if p.current_transaction_start_offset >= 0
        ]
        return self._with_coordinators(found) if found else []

    def _with_coordinators(self, found: list[OpenTransaction]) -> list[OpenTransaction]:
        listed = self._call(
            "list transactions",
            self._client.list_transactions,
            producer_id_filters=sorted({t.producer_id for t in found}),
        )
        ids = {t.producer_id: t.transactional_id for rows in listed.values() for t in rows}
        txn_ids = sorted(set(ids.values()))
        described = (
            self._call("describe transactions", self._client.describe_transactions, txn_ids)
            if txn_ids
            else {}
        )
        result = []
        for open_ in found:
            txn_id = ids.get(open_.producer_id)
            d = described.get(txn_id) if txn_id else None
            if d is None:
                result.append(open_)
                continue
            result.append(
                OpenTransaction(
                    **{
                        **open_.__dict__,
                        "transactional_id": txn_id,
                        "coordinator_state": str(d.state.value),
                        "coordinator_epoch_of_producer": d.producer_epoch,
                        "started_ms": d.transaction_start_time_ms
                        if d.transaction_start_time_ms >= 0
                        else None,
                        "timeout_ms": d.transaction_timeout_ms,
                        "coordinator_has_partition": TopicPartition(open_.topic, open_.partition)
                        in d.topic_partitions,
                    }
                )
            )
        return result

    def abort(self, txn: OpenTransaction) -> None:
        """Write the abort marker for `txn` on its partition: its records become aborted
        and the partition's readers move past them."""
        self._call(
            f"abort the transaction on {txn.where}",
            self._client.abort_transaction,
            AbortTransactionSpec(
                TopicPartition(txn.topic, txn.partition),
                txn.producer_id,
                txn.producer_epoch,
                max(txn.coordinator_epoch, 0),
            ),
        )

    def fence(self, transactional_id: str) -> None:
        """Take over `transactional_id` with a new producer epoch: its coordinator aborts
        the transaction open under it on every partition, and its old producer (if it
        lives) is fenced: its next call fails, and Connect restarts a fenced task."""

        def take_over() -> None:
            producer = kafka.KafkaProducer(
                **self.settings.options(), transactional_id=transactional_id
            )
            try:
                producer.init_transactions()
            finally:
                producer.close(timeout=5)

        self._call(f"fence transactional id {transactional_id}", take_over)
