"""Doctor's checks that the payload limit is the same setting everywhere: the outbox
table's CHECK, the connector's producer and the topics. A record that passes the table
but not Kafka would fail the Debezium task and hold every later event behind it."""

from __future__ import annotations

from typing import Any

import psycopg

from cdcbox.connect.connectors import ConnectorSpec
from cdcbox.kafka.client import Admin, KafkaSettings
from cdcbox.limits import KAFKA_DEFAULT_MAX_REQUEST_SIZE, EventLimits
from cdcbox.migrate import recorded_payload_limit
from cdcbox.names import DbNames
from cdcbox.ops.check import Check

_SETTING = "CDCBOX_MAX_PAYLOAD_BYTES / --max-payload-bytes"


def table_limit_check(conn: psycopg.Connection[Any], names: DbNames, limits: EventLimits) -> Check:
    recorded = recorded_payload_limit(conn, names)
    return Check(
        "outbox payload limit",
        recorded == limits.max_payload_bytes,
        f"table CHECK allows {recorded if recorded is not None else 'any size'}, "
        f"the setting is {limits.max_payload_bytes} bytes",
        f"run `cdc-ctl db migrate` with the same {_SETTING}: it replaces the CHECK",
    )


def connector_limit_check(spec: ConnectorSpec, limits: EventLimits) -> Check:
    key = "producer.override.max.request.size"
    allowed = int(spec.config.get(key, KAFKA_DEFAULT_MAX_REQUEST_SIZE))
    return Check(
        "connector record size",
        allowed >= limits.max_record_bytes,
        f"{spec.name}: producer takes {allowed} bytes, the largest outbox record is "
        f"{limits.max_record_bytes}",
        f"set {key} >= {limits.max_record_bytes} in the spec, or lower {_SETTING}",
    )


def topic_limit_checks(kafka: KafkaSettings, topics: list[str], limits: EventLimits) -> list[Check]:
    with Admin(kafka) as admin:
        existing = [t for t in topics if t in admin.list_topics()]
        configs = admin.topic_configs(existing)
    checks = []
    for topic in existing:
        allowed = int(configs.get(topic, {}).get("max.message.bytes", "0"))
        checks.append(
            Check(
                f"topic {topic} record size",
                allowed >= limits.max_record_bytes,
                f"max.message.bytes={allowed}, the largest outbox record is "
                f"{limits.max_record_bytes}",
                f"raise the topic's max.message.bytes (or the broker's message.max.bytes) "
                f"to {limits.broker_max_message_bytes}, or lower {_SETTING}",
            )
        )
    return checks
