"""The Kafka transactions open on the cluster's topics, as one reading of the pipeline's
state shows them (`cdc-ctl top`, the exporter): who holds which partition, for how
long, and whether nothing but an abort will end it (cdcbox.kafka.transactions)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from cdcbox.kafka.client import KafkaSettings
from cdcbox.kafka.transactions import TransactionAdmin
from cdcbox.ops.heal import watched_topics


@dataclass(frozen=True)
class TransactionState:
    """A Kafka transaction open on one partition (it holds back the partition's
    read_committed readers): its owner (transactional id, or `producer N` when no
    coordinator knows it), its age, and whether nothing but an abort will end it."""

    topic: str
    partition: int
    owner: str
    age_s: float
    hanging: bool


def read_transactions(kafka: KafkaSettings) -> list[TransactionState]:
    """Every transaction open on a topic but Kafka's internal ones."""
    with TransactionAdmin(kafka) as admin:
        found = admin.open_transactions(watched_topics(admin.list_topics()))
    now_ms = int(time.time() * 1000)
    return [
        TransactionState(
            t.topic,
            t.partition,
            t.transactional_id or f"producer {t.producer_id}",
            t.age_s(now_ms),
            t.hanging(now_ms) is not None,
        )
        for t in found
    ]
