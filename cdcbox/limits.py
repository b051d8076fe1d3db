"""What an outbox row may hold so that every part of the pipeline can publish it.

One row the pipeline cannot publish (a topic name Kafka refuses, a record over the
producer's `max.request.size`) fails the Debezium task, and every later event of every
aggregate waits behind it. So these rules are enforced where the row is written: by CHECK
constraints in the outbox table (raw SQL is covered too) and by `Outbox.append` before it
writes. `EventLimits` is the one setting the migrations, the producers, the stack's
broker and `cdc-ctl doctor` read; `CDCBOX_MAX_PAYLOAD_BYTES` sets it at the edges.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from cdcbox.errors import ConfigError

# aggregate_type names the topic `outbox.event.<type>` and its `.dlq`: Kafka allows
# [A-Za-z0-9._-] and 249 characters, so 200 leaves room for any prefix up to 45.
AGGREGATE_TYPE_PATTERN = "^[A-Za-z0-9._-]{1,200}$"
AGGREGATE_TYPE = re.compile(AGGREGATE_TYPE_PATTERN)
# Upper bounds of the other fields that travel as key or headers (bytes, UTF-8). They
# keep the record's size within `max_payload_bytes` + HEADER_ALLOWANCE whatever they hold.
FIELD_MAX_BYTES = {
    "aggregate_id": 1024,
    "event_type": 200,
    "content_type": 200,
    "trace_id": 512,
    "causation_id": 512,
}
# Key, headers (names, values, occurred_at, event id) and Kafka's per-record framing,
# with room to spare: the fields above add at most ~2.2 KiB.
HEADER_ALLOWANCE = 16 * 1024
# Kafka's own defaults (producer max.request.size, broker/topic message.max.bytes).
KAFKA_DEFAULT_MAX_REQUEST_SIZE = 1_048_576
KAFKA_DEFAULT_MAX_MESSAGE_BYTES = 1_048_588
DEFAULT_MAX_PAYLOAD_BYTES = 900_000  # + allowance fits Kafka's 1 MiB defaults
# What a dead letter adds to its record: the error headers (a message of up to 4000
# characters, up to 4 bytes each in UTF-8) and what the consumer decoded.
DEAD_LETTER_ALLOWANCE = 32 * 1024
PAYLOAD_CONSTRAINT = "outbox_payload_limit"


@dataclass(frozen=True)
class EventLimits:
    """The largest payload an outbox row may carry, and what that asks of Kafka."""

    max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES

    def __post_init__(self) -> None:
        if not isinstance(self.max_payload_bytes, int) or self.max_payload_bytes < 1:
            raise ConfigError(
                f"max payload size must be a positive number of bytes, "
                f"not {self.max_payload_bytes!r} (CDCBOX_MAX_PAYLOAD_BYTES)"
            )

    @property
    def max_record_bytes(self) -> int:
        """The largest Kafka record an outbox row becomes: what the producers'
        `max.request.size` and the topics' `max.message.bytes` must allow."""
        return self.max_payload_bytes + HEADER_ALLOWANCE

    @property
    def producer_max_request_size(self) -> int:
        """`max.request.size` for a producer of outbox records: Kafka's default unless
        the records need more."""
        return max(KAFKA_DEFAULT_MAX_REQUEST_SIZE, self.max_record_bytes)

    def dead_letter_max_request_size(self, largest_record: int = 0) -> int:
        """`max.request.size` for a producer of dead letters of records up to
        `largest_record` bytes (what a consumed topic's `max.message.bytes` allows), or
        of outbox records when that is larger."""
        return max(self.producer_max_request_size, largest_record) + DEAD_LETTER_ALLOWANCE

    @property
    def broker_max_message_bytes(self) -> int:
        """`message.max.bytes` for a broker that takes outbox records (batch framing
        included)."""
        return max(KAFKA_DEFAULT_MAX_MESSAGE_BYTES, self.max_record_bytes + 1024)
