"""An outbox row as the Kafka record the Debezium Outbox Event Router makes of it.

Topic, key, value, header names, header order and record timestamp all match what our
connector spec produces, so a consumer cannot tell which relay delivered a record.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC

from cdcbox import wire
from cdcbox.seam.relay import OutboxRow


@dataclass(frozen=True)
class KafkaRecord:
    """A record as the relays publish it: topic, key (aggregate id), value, headers."""

    topic: str
    key: bytes
    value: bytes
    headers: list[tuple[str, bytes]]
    timestamp_ms: int


def to_record(row: OutboxRow) -> KafkaRecord:
    values = {
        "event_type": row.event_type,
        "aggregate_type": row.aggregate_type,
        "aggregate_version": str(row.aggregate_version),
        "occurred_at": row.occurred_at,
        "trace_id": row.trace_id,
        "content_type": row.content_type,
        "causation_id": row.causation_id,
    }
    headers = [(wire.HEADER_EVENT_ID, str(row.event_id).encode())]
    headers += [(header, values[column].encode()) for column, header in wire.COLUMN_HEADERS]
    # The router turns the `timestamp` column (UTC, no zone) into epoch milliseconds.
    timestamp_ms = int(row.created_at.replace(tzinfo=UTC).timestamp() * 1000)
    return KafkaRecord(
        topic=wire.topic_for(row.aggregate_type),
        key=row.aggregate_id.encode(),
        value=bytes(row.payload),
        headers=headers,
        timestamp_ms=timestamp_ms,
    )
