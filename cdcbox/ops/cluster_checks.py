"""What Kafka Connect and Kafka must offer before the first event (`doctor`'s checks of
the cluster): the pinned Debezium plugin, exactly-once source support on the workers,
topic names Kafka keeps apart, and the topics a deployment needs. Each check that fails
says how to fix it."""

from __future__ import annotations

from cdcbox import wire
from cdcbox.connect import exactly_once
from cdcbox.connect.client import ConnectClient
from cdcbox.connect.connectors import DEBEZIUM_POSTGRES_CLASS, ConnectorSpec
from cdcbox.kafka.client import Admin, KafkaSettings
from cdcbox.kafka.topics import colliding_topics
from cdcbox.ops.check import Check


def connect_checks(client: ConnectClient, expected: str, spec: ConnectorSpec) -> list[Check]:
    plugins = client.plugins()
    found = [p for p in plugins if p.get("class") == DEBEZIUM_POSTGRES_CLASS]
    version = found[0].get("version", "?") if found else None
    return [
        Check(
            "debezium plugin",
            version == expected,
            f"{DEBEZIUM_POSTGRES_CLASS} {version or 'not installed'} (expected {expected})",
            "put the Debezium PostgreSQL connector of the pinned version on the worker's "
            "plugin.path (`cdc-ctl stack up` does)",
        ),
        exactly_once_check(client, spec),
    ]


def exactly_once_check(client: ConnectClient, spec: ConnectorSpec) -> Check:
    """Whether the workers commit source records and offsets in one transaction."""
    lacking = exactly_once.worker_lacks_it(client, spec.connector_class, spec.config)
    return Check(
        "exactly-once source",
        not lacking,
        "the workers run without it: a worker crash may put duplicates on the topics"
        if lacking
        else f"enabled on the workers ({spec.name}: {exactly_once.SUPPORT}="
        f"{spec.config.get(exactly_once.SUPPORT, 'requested')})",
        f"add {exactly_once.WORKER_SETTING} to every worker's properties, worker by worker "
        "(a running cluster: each to `preparing` first, then each to `enabled`), then "
        "`cdc-ctl apply` again",
    )


def kafka_checks(kafka: KafkaSettings, topics: list[str]) -> list[Check]:
    with Admin(kafka) as admin:
        existing = admin.list_topics()
        partitions = admin.partition_counts([t for t in topics if t in existing])
    outbox_topics = {t for t in existing if t.startswith(wire.TOPIC_PREFIX)}
    collisions = colliding_topics(outbox_topics | set(topics))
    return [
        Check(
            "topic names",
            not collisions,
            "; ".join(" = ".join(group) for group in collisions) or "no two collide",
            "Kafka reads '.' and '_' alike in topic names: rename one aggregate type of each "
            "group (a second one's topic cannot be created, and its connector task fails)",
        ),
        *_topic_checks(topics, existing, partitions),
    ]


def _topic_checks(topics: list[str], existing: set[str], partitions: dict[str, int]) -> list[Check]:
    return [
        Check(
            f"topic {t}",
            t in existing,
            f"{partitions[t]} partitions" if t in partitions else "missing",
            "it is created with the first event (or by the first consumer); check "
            "auto.create.topics.enable and num.partitions",
        )
        for t in topics
    ]
