"""Kafka administration the library needs (topics, group offsets); kafka-python's errors
become `ServiceUnavailable` here and nowhere else."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka.errors import KafkaError

from cdcbox.errors import ServiceUnavailable


@contextmanager
def admin_client(bootstrap_servers: str) -> Iterator[KafkaAdminClient]:
    try:
        admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers, request_timeout_ms=10000)
    except KafkaError as e:
        raise ServiceUnavailable(f"Kafka at {bootstrap_servers} is unreachable: {e}") from e
    try:
        yield admin
    finally:
        admin.close()


def ensure_topics(bootstrap_servers: str, topics: Iterable[str]) -> list[str]:
    """Create the topics that do not exist yet (broker-default partitions); return them.

    A consumer may start before the relay published anything; subscribing to a topic that
    does not exist yet leaves it blind until its next metadata refresh.
    """
    wanted = set(topics)
    with admin_client(bootstrap_servers) as admin:
        try:
            missing = sorted(wanted - set(admin.list_topics()))
            if missing:
                admin.create_topics(
                    [NewTopic(t) for t in missing], raise_errors=False, wait_for_metadata=True
                )
        except KafkaError as e:
            raise ServiceUnavailable(f"cannot create topics {sorted(wanted)}: {e}") from e
    return missing


KAFKA_DEFAULT_RETENTION_MS = 7 * 24 * 3600 * 1000  # log.retention.hours=168


def topic_retention_ms(bootstrap_servers: str, prefix: str = "outbox.event.") -> int:
    """The longest retention.ms set on the outbox topics, else Kafka's default (7 days):
    what an inbox must outlive. Pass --topic-retention when the broker default differs."""
    from kafka.admin import ConfigResource, ConfigResourceType

    with admin_client(bootstrap_servers) as admin:
        topics = [t for t in admin.list_topics() if t.startswith(prefix) and not t.endswith(".dlq")]
        if not topics:
            return KAFKA_DEFAULT_RETENTION_MS
        result = admin.describe_configs(
            [ConfigResource(ConfigResourceType.TOPIC, t) for t in topics]
        )
    values = [
        int(entry["value"] if isinstance(entry, dict) else entry)
        for configs in result.get("topic", {}).values()
        for key, entry in configs.items()
        if key == "retention.ms"
    ]
    return max(values, default=KAFKA_DEFAULT_RETENTION_MS)
