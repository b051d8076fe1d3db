"""Topics the library needs: creating the consumer's topics before it subscribes, and the
retention an inbox must outlive."""

from __future__ import annotations

from collections.abc import Iterable

from cdcbox import wire
from cdcbox.kafka_client import Admin, KafkaSettings

KAFKA_DEFAULT_RETENTION_MS = 7 * 24 * 3600 * 1000  # log.retention.hours=168


def ensure_topics(settings: KafkaSettings, topics: Iterable[str]) -> list[str]:
    """Create the topics that do not exist yet (broker-default partitions); return them.

    A consumer may start before the relay published anything; subscribing to a topic that
    does not exist yet leaves it blind until its next metadata refresh.
    """
    wanted = set(topics)
    with Admin(settings) as admin:
        missing = sorted(wanted - admin.list_topics())
        if missing:
            admin.create_topics(missing)
    return missing


def topic_retention_ms(settings: KafkaSettings, prefix: str = "outbox.event.") -> int:
    """The longest retention.ms set on the outbox topics, else Kafka's default (7 days):
    what an inbox must outlive. Pass --topic-retention when the broker default differs."""
    with Admin(settings) as admin:
        topics = [
            t
            for t in admin.list_topics()
            if t.startswith(prefix) and not t.endswith(wire.DLQ_SUFFIX)
        ]
        configs = admin.topic_configs(topics)
    values = [int(c["retention.ms"]) for c in configs.values() if "retention.ms" in c]
    return max(values, default=KAFKA_DEFAULT_RETENTION_MS)
