"""An event as a consumer sees it, and decoding a Kafka record of the wire contract
(`cdcbox.wire`) into one.

A record that cannot be decoded raises `PoisonRecord` with the reason; the consumer sends
it to the dead-letter topic at once rather than retrying what can never succeed. When
only the payload is at fault, `UndecodablePayload` carries the event it belongs to.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cdcbox import wire
from cdcbox.errors import PoisonRecord
from cdcbox.wire import ConsumedRecord


@dataclass(frozen=True)
class Event:
    """One decoded outbox event. Guarantee: the headers of the wire contract were present
    and well-formed; `payload` is decoded (JSON, or Avro into the handler's schema) for
    handled event types; `aggregate_version` is None for an unversioned event."""

    event_id: uuid.UUID
    event_type: str
    aggregate_type: str
    aggregate_id: str
    aggregate_version: int | None
    occurred_at: datetime | None
    trace_id: str | None
    content_type: str
    payload: Any
    value: bytes
    topic: str
    partition: int
    offset: int
    # The id of the event whose handler appended this one (None: not caused by one).
    causation_id: str | None = None

    @property
    def log_extra(self) -> dict[str, str]:
        """The same as fields of the log record (`extra=`), for JSON logs."""
        return {
            "event_id": str(self.event_id),
            "aggregate_type": self.aggregate_type,
            "aggregate_id": self.aggregate_id,
            "trace_id": self.trace_id or "",
            "causation_id": self.causation_id or "",
        }

    @property
    def log_fields(self) -> str:
        """How log lines name the event: id, aggregate, trace id and, when a handler
        emitted it, the event that caused it."""
        caused_by = f", caused by {self.causation_id}" if self.causation_id else ""
        return (
            f"{self.event_id} (aggregate {self.aggregate_type}/{self.aggregate_id}, "
            f"trace {self.trace_id or '-'}{caused_by})"
        )


class UndecodablePayload(PoisonRecord):
    """The envelope is well-formed but the payload is not: `event` (payload None) names
    the event, so its aggregate can be parked like after a handler failure."""

    def __init__(self, message: str, event: Event) -> None:
        super().__init__(message)
        self.event = event


def headers_of(record: ConsumedRecord) -> dict[str, bytes | None]:
    return {name: value for name, value in (record.headers or [])}


def header(record: ConsumedRecord, name: str) -> bytes | None:
    """One header's value (the first), without building the whole mapping."""
    return next((v for k, v in (record.headers or []) if k == name), None)


def _text(headers: dict[str, bytes | None], name: str, required: bool) -> str | None:
    raw = headers.get(name)
    if raw is None:
        if required:
            raise PoisonRecord(f"missing header {name!r}")
        return None
    try:
        text = raw.decode()
    except UnicodeDecodeError as e:
        raise PoisonRecord(f"header {name!r} is not UTF-8") from e
    if "\x00" in text:
        raise PoisonRecord(f"header {name!r} holds a NUL byte, which PostgreSQL cannot store")
    return text


# The largest aggregate version the consumer's tables (bigint) can hold.
MAX_VERSION = 2**63 - 1

PayloadDecoder = Callable[[str, str, bytes], Any]  # (content type, event type, value)


def decode_payload(content_type: str, event_type: str, value: bytes) -> Any:
    """JSON becomes Python data; anything else stays bytes (see `cdcbox.avro` for Avro)."""
    if content_type == wire.CONTENT_TYPE_AVRO:
        raise PoisonRecord("Avro payload, but this consumer has no schema catalogue")
    if content_type == wire.CONTENT_TYPE_JSON:
        try:
            return json.loads(value)
        except (ValueError, RecursionError) as e:  # RecursionError: nested too deep
            raise PoisonRecord(f"value is not valid JSON: {e}") from e
    return value


def decode(record: ConsumedRecord, payload_decoder: PayloadDecoder = decode_payload) -> Event:
    """Turn a kafka-python ConsumerRecord into an Event, or raise PoisonRecord."""
    headers = headers_of(record)
    raw_id = _text(headers, wire.HEADER_EVENT_ID, required=True)
    try:
        event_id = uuid.UUID(raw_id)
    except (TypeError, ValueError) as e:
        raise PoisonRecord(f"header 'id' is not a UUID: {raw_id!r}") from e
    event_type = _text(headers, wire.HEADER_EVENT_TYPE, required=True)
    aggregate_type = _text(headers, wire.HEADER_AGGREGATE_TYPE, required=True)
    key = record.key
    if key is None:
        raise PoisonRecord("record has no key (the aggregate id)")
    if b"\x00" in key:
        raise PoisonRecord(
            "the key (the aggregate id) holds a NUL byte, which PostgreSQL cannot store"
        )
    version_text = _text(headers, wire.HEADER_AGGREGATE_VERSION, required=False)
    try:
        version = int(version_text) if version_text else None
        version = version or None  # 0 is the contract's "unversioned"
    except ValueError as e:
        raise PoisonRecord(f"header 'aggregate_version' is not an integer: {version_text!r}") from e
    if version is not None and not 0 < version <= MAX_VERSION:
        raise PoisonRecord(
            f"header 'aggregate_version' is {version}, outside 0..{MAX_VERSION} (a bigint)"
        )
    occurred_text = _text(headers, wire.HEADER_OCCURRED_AT, required=False)
    try:
        occurred_at = datetime.fromisoformat(occurred_text) if occurred_text else None
    except ValueError as e:
        raise PoisonRecord(f"header 'occurred_at' is not ISO-8601: {occurred_text!r}") from e
    content_type = (
        _text(headers, wire.HEADER_CONTENT_TYPE, required=False) or wire.CONTENT_TYPE_JSON
    )
    value = bytes(record.value or b"")

    def event_with(payload: Any) -> Event:
        return Event(
            event_id=event_id,
            event_type=event_type or "",
            aggregate_type=aggregate_type or "",
            aggregate_id=key.decode(errors="replace"),
            aggregate_version=version,
            occurred_at=occurred_at,
            trace_id=_text(headers, wire.HEADER_TRACEPARENT, required=False) or None,
            content_type=content_type,
            payload=payload,
            value=value,
            topic=record.topic,
            partition=record.partition,
            offset=record.offset,
            causation_id=_text(headers, wire.HEADER_CAUSATION_ID, required=False) or None,
        )

    try:
        payload = payload_decoder(content_type, event_type or "", value)
    except PoisonRecord as e:
        raise UndecodablePayload(str(e), event_with(None)) from e
    return event_with(payload)
