"""The wire contract both relays emit: topic, key, value and header names (documented in
docs/concepts/wire-contract.md).

Kept in one module so the producer, the Debezium connector spec, the polling relay and
the consumer can never drift apart on a name.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from cdcbox.errors import ConfigError

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
    """The topic both relays publish `aggregate_type`'s events to."""
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


# In a handler's `event_types`: it takes every event of its topics, whatever its type
# header says, or when it has none.
ANY_EVENT_TYPE = "*"
# Where event ids that are not UUIDs (Debezium lets the id column be any type) are
# mapped to the UUID the inbox keys on: see `foreign_event_key`.
FOREIGN_ID_NAMESPACE = uuid.UUID("6b7e3c8e-4f1a-5d2b-9c3e-0a1b2c3d4e5f")


def foreign_event_key(topic: str, aggregate_id: str, raw_id: str) -> uuid.UUID:
    """The inbox key of an event id that is not a UUID: uuid5 of the id within its source,
    its topic and aggregate. Every copy of a record (redelivered, replayed from its dead
    letters to the same topic) maps to the same key; two producers whose `bigserial`
    ids both reach 1, or one whose sequence restarted, do not collide."""
    return uuid.uuid5(FOREIGN_ID_NAMESPACE, "\x1f".join((topic, aggregate_id, raw_id)))


@dataclass(frozen=True)
class WireFormat:
    """Where a producer's records carry each part of an event. The default reads
    cdcbox's contract and Debezium's Outbox Event Router as its documentation configures
    it, with no setting: for each part the first of its headers present wins; an
    aggregate type no header names is read from the topic through `topic_pattern` (the
    router's `route.topic.replacement`, `{aggregate_type}` for `${routedByValue}`); an
    event without a type header has `default_event_type`, or none ("").

    A handler declares another (`Handler.wire_format`) for a producer configured
    otherwise: the Quarkus extension's header names, a topic routed by another column.
    """

    event_id: str = HEADER_EVENT_ID
    event_type: tuple[str, ...] = (HEADER_EVENT_TYPE, "eventType")
    aggregate_type: tuple[str, ...] = (HEADER_AGGREGATE_TYPE,)
    aggregate_version: tuple[str, ...] = (HEADER_AGGREGATE_VERSION,)
    occurred_at: tuple[str, ...] = (HEADER_OCCURRED_AT,)
    traceparent: tuple[str, ...] = (HEADER_TRACEPARENT,)
    content_type: tuple[str, ...] = (HEADER_CONTENT_TYPE,)
    causation_id: tuple[str, ...] = (HEADER_CAUSATION_ID,)
    topic_pattern: str = TOPIC_PREFIX + "{aggregate_type}"
    default_event_type: str | None = None

    def __post_init__(self) -> None:
        if self.topic_pattern.count("{aggregate_type}") != 1:
            raise ConfigError(
                f"topic_pattern {self.topic_pattern!r} must hold {{aggregate_type}} once "
                "(where the router's route.topic.replacement has ${routedByValue})"
            )

    def topic(self, aggregate_type: str) -> str:
        return self.topic_pattern.replace("{aggregate_type}", aggregate_type)

    def aggregate_type_of(self, topic: str) -> str | None:
        """The aggregate type `topic` names through `topic_pattern`, or None."""
        before, _, after = self.topic_pattern.partition("{aggregate_type}")
        if topic.startswith(before) and topic.endswith(after) and len(topic) > len(before + after):
            return topic[len(before) : len(topic) - len(after)]
        return None


DEFAULT_FORMAT = WireFormat()
