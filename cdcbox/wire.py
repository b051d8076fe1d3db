"""The wire contract both relays emit (DESIGN.md): topic, key, value and header names.

Kept in one module so the producer, the Debezium connector spec, the polling relay and
the consumer can never drift apart on a name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

TOPIC_PREFIX = "outbox.event."
# A topic's dead letters go to topic + this suffix; no aggregate type may end with it, or
# its events would be written into another aggregate type's dead-letter topic.
DLQ_SUFFIX = ".dlq"

HEADER_EVENT_ID = "id"
HEADER_EVENT_TYPE = "event_type"
HEADER_AGGREGATE_TYPE = "aggregate_type"
HEADER_AGGREGATE_VERSION = "aggregate_version"
HEADER_OCCURRED_AT = "occurred_at"
HEADER_TRACEPARENT = "traceparent"
HEADER_CONTENT_TYPE = "content-type"
# The event id of the consumed event whose handler appended this one ("" for none).
HEADER_CAUSATION_ID = "causation_id"
# On a replayed dead letter: the consumer name it is replayed for. That consumer applies
# it even though the aggregate is parked (the park holds back live events only).
HEADER_REPLAY_FOR = "cdcbox.replay.for"
# How often the copy was put back behind an earlier held event of its aggregate.
HEADER_REPLAY_HOPS = "cdcbox.replay.hops"

CONTENT_TYPE_JSON = "application/json"
CONTENT_TYPE_AVRO = "application/vnd.apache.avro+binary"

# Outbox column -> header, in the order the router's additional placement lists them.
COLUMN_HEADERS = (
    ("event_type", HEADER_EVENT_TYPE),
    ("aggregate_type", HEADER_AGGREGATE_TYPE),
    ("aggregate_version", HEADER_AGGREGATE_VERSION),
    ("occurred_at", HEADER_OCCURRED_AT),
    ("trace_id", HEADER_TRACEPARENT),
    ("content_type", HEADER_CONTENT_TYPE),
    ("causation_id", HEADER_CAUSATION_ID),
)


def topic_for(aggregate_type: str) -> str:
    return TOPIC_PREFIX + aggregate_type


class ConsumedRecord(Protocol):
    """One record as a consumer receives it."""

    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...

    @property
    def offset(self) -> int: ...

    @property
    def key(self) -> bytes | None: ...

    @property
    def value(self) -> bytes | None: ...

    @property
    def headers(self) -> Sequence[tuple[str, bytes | None]]: ...
