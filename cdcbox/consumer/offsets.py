"""Offset commits that outlive a broker outage.

An offset is committed only after the records before it were applied and made durable;
a commit is a promise, never a precondition, so a commit that fails loses nothing: the
records come again and the inbox turns them into counted duplicates. What must not
happen is the consumer exiting because the broker that coordinates its group was down
for the moment of the commit. A commit Kafka did not answer is kept and retried with
the next batch's offsets, or on its own at the next idle poll; a new assignment drops
it (the partitions resume from the offsets committed so far, and their records are
deduplicated by the inbox).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Protocol

from cdcbox.errors import CommitRefused, KafkaUnavailable
from cdcbox.kafka.client import TopicPartition

log = logging.getLogger("cdcbox.consumer")


class _Committing(Protocol):
    def commit(self, offsets: Mapping[TopicPartition, int]) -> None: ...


class OffsetCommits:
    """The group's offsets, committed for the consumer's thread; `reassigned` may be
    called from kafka-python's IO thread."""

    def __init__(self) -> None:
        self._pending: dict[TopicPartition, int] = {}
        self._reassigned = threading.Event()

    @property
    def pending(self) -> dict[TopicPartition, int]:
        """Offsets applied and durable whose commit Kafka did not answer yet."""
        return dict(self._pending)

    def reassigned(self) -> None:
        """The group gave this member a new assignment: kept offsets are dropped at the
        next commit (their records come again from the offsets committed so far)."""
        self._reassigned.set()

    def commit(self, kafka: _Committing, done: Mapping[TopicPartition, int]) -> None:
        """Commit `done` ("resume at offset" per partition) with whatever an earlier
        commit left pending. Never raises for a broker outage or a rebalance."""
        if self._reassigned.is_set():
            self._reassigned.clear()
            self._pending.clear()
        offsets = {**self._pending, **done}
        if not offsets:
            return
        try:
            kafka.commit(offsets)
        except CommitRefused as e:
            # The group rebalanced under us: the partitions' new owner gets these
            # records again, and the inbox turns them into counted duplicates.
            log.warning(
                "offset commit refused after a rebalance (%s); the records will "
                "be redelivered and deduplicated",
                e,
            )
            self._pending.clear()
        except KafkaUnavailable as e:
            log.warning(
                "offset commit not answered (%s); the records are applied, their offsets "
                "are committed once Kafka answers (a restart meanwhile redelivers them to "
                "the inbox, which drops them)",
                e,
            )
            self._pending = offsets
        else:
            self._pending.clear()

    def retry(self, kafka: _Committing) -> None:
        """Commit what an outage left pending, if anything (at an idle poll)."""
        if self._pending:
            self.commit(kafka, {})
