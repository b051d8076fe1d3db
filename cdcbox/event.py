"""An event as a consumer sees it, and decoding a Kafka record into one: a record of
cdcbox's wire contract (`cdcbox.wire`), or of any producer using Debezium's Outbox Event
Router, as its `WireFormat` names the parts.

A record that cannot be decoded raises `PoisonRecord` with the reason; the consumer sends
it to the dead-letter topic at once rather than retrying what can never succeed. When
only the payload is at fault, `UndecodablePayload` carries the event it belongs to.
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cdcbox import wire
from cdcbox.errors import PoisonRecord
from cdcbox.limits import FIELD_MAX_BYTES
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
    # The event id as the record carries it, when it is not a UUID (a producer whose id
    # column is of another type): `event_id` is then `wire.foreign_event_key`, the inbox's
    # key.
    source_event_id: str | None = None

    def with_payload(self, payload: Any) -> Event:
        """This event with another payload: `dataclasses.replace` without its per-call
        cost (no __init__ re-run; the fields were checked when this one was made)."""
        copy = object.__new__(Event)
        copy.__dict__.update(self.__dict__, payload=payload)
        return copy

    @property
    def id_text(self) -> str:
        """The event id as its producer wrote it: what logs and operators see."""
        return self.source_event_id or str(self.event_id)

    @property
    def log_extra(self) -> dict[str, str]:
        """The same as fields of the log record (`extra=`), for JSON logs."""
        return {
            "event_id": self.id_text,
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
            f"{self.id_text} (aggregate {self.aggregate_type}/{self.aggregate_id}, "
            f"trace {self.trace_id or '-'}{caused_by})"
        )


class UndecodablePayload(PoisonRecord):
    """The envelope is well-formed but the payload is not: `event` (payload None) names
    the event, so its aggregate can be parked like after a handler failure."""

    def __init__(self, message: str, event: Event) -> None:
        super().__init__(message)
        self.event = event


def headers_of(record: ConsumedRecord) -> dict[str, bytes | None]:
    return dict(record.headers or ())


def header(record: ConsumedRecord, name: str) -> bytes | None:
    """One header's value (the first), without building the whole mapping."""
    for key, value in record.headers or ():
        if key == name:
            return value
    return None


def _text(
    headers: dict[str, bytes | None], names: str | tuple[str, ...], required: bool
) -> str | None:
    """The first of `names` the record carries, as text."""
    candidates = (names,) if isinstance(names, str) else names
    raw = None
    for name in candidates:  # a loop, not a generator: this runs ~8 times a record
        raw = headers.get(name)
        if raw is not None:
            break
    if raw is None:
        if required:
            raise PoisonRecord(f"missing header {candidates[0]!r}")
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
# The longest aggregate type and id a record may carry: the consumer's tables index them
# together (versions, parked aggregates, unfinished inbox rows), and a btree entry holds
# at most ~2.7 KB. The outbox's own bounds (cdcbox.limits), applied to every producer.
MAX_AGGREGATE_TYPE_BYTES = 200
MAX_AGGREGATE_ID_BYTES = FIELD_MAX_BYTES["aggregate_id"]


def decode_payload(content_type: str, event_type: str, value: bytes) -> Any:
    """JSON becomes Python data; anything else stays bytes (see `cdcbox.avro` for Avro).
    A record without a content type (a producer that is not cdcbox) is read as the
    Outbox Event Router may deliver it: expanded JSON, a JSON document inside a JSON
    string (the router's default for a `jsonb` payload), JsonConverter's schema envelope,
    or bytes that are not JSON, handed over as they are."""
    if content_type == wire.CONTENT_TYPE_AVRO:
        raise PoisonRecord("Avro payload, but this consumer has no schema catalogue")
    if content_type == wire.CONTENT_TYPE_JSON:
        try:
            return json.loads(value)
        except (ValueError, RecursionError) as e:  # RecursionError: nested too deep
            raise PoisonRecord(f"value is not valid JSON: {e}") from e
    if content_type == "":
        return _foreign_payload(value)
    return value


def _foreign_payload(value: bytes) -> Any:
    try:
        payload = json.loads(value)
    except (ValueError, RecursionError):
        return value
    if isinstance(payload, dict) and set(payload) == {"schema", "payload"}:
        payload = payload["payload"]  # JsonConverter with schemas.enable (its default)
    if isinstance(payload, str) and payload[:1] in ("{", "["):
        try:
            return json.loads(payload)
        except (ValueError, RecursionError):
            return payload
    return payload


def event_id_of(raw_id: str, topic: str, aggregate_id: str) -> tuple[uuid.UUID, str | None]:
    """The inbox's key for an event id as a record carries it, and the id's own text
    when it is not a UUID (`wire.foreign_event_key` then: within its topic and
    aggregate, the same for every copy)."""
    try:
        return uuid.UUID(raw_id), None
    except ValueError:
        return wire.foreign_event_key(topic, aggregate_id, raw_id), raw_id


def decode_envelope(record: ConsumedRecord, fmt: wire.WireFormat = wire.DEFAULT_FORMAT) -> Event:
    """Everything but the payload: a record's headers and key as an `Event` whose
    `payload` is None (`decode_payload` reads `value` for the handler that takes it).
    Raises `PoisonRecord` with the reason when the envelope is not of `fmt`."""
    headers = headers_of(record)
    raw_id = _text(headers, fmt.event_id, required=True) or ""
    if not raw_id.strip():
        raise PoisonRecord(f"header {fmt.event_id!r} (the event id) is empty")
    event_type = _text(headers, fmt.event_type, required=False) or fmt.default_event_type or ""
    aggregate_type = _text(headers, fmt.aggregate_type, required=False) or (
        fmt.aggregate_type_of(record.topic)
    )
    if not aggregate_type:
        raise PoisonRecord(
            f"no aggregate type: no header {fmt.aggregate_type[0]!r} and the topic "
            f"{record.topic!r} does not match {fmt.topic_pattern!r}"
        )
    if len(aggregate_type.encode()) > MAX_AGGREGATE_TYPE_BYTES:
        raise PoisonRecord(
            f"the aggregate type is {len(aggregate_type.encode())} bytes, over the "
            f"{MAX_AGGREGATE_TYPE_BYTES} the consumer's tables can index"
        )
    key = record.key
    if key is None:
        raise PoisonRecord("record has no key (the aggregate id)")
    if len(key) > MAX_AGGREGATE_ID_BYTES:
        raise PoisonRecord(
            f"the key (the aggregate id) is {len(key)} bytes, over the "
            f"{MAX_AGGREGATE_ID_BYTES} the consumer's tables can index"
        )
    if b"\x00" in key:
        raise PoisonRecord(
            "the key (the aggregate id) holds a NUL byte, which PostgreSQL cannot store"
        )
    version = _version(_text(headers, fmt.aggregate_version, required=False))
    occurred_text = _text(headers, fmt.occurred_at, required=False)
    try:
        occurred_at = datetime.fromisoformat(occurred_text) if occurred_text else None
    except ValueError as e:
        raise PoisonRecord(f"header 'occurred_at' is not ISO-8601: {occurred_text!r}") from e
    has_content_type = any(headers.get(n) is not None for n in fmt.content_type)
    content_type = (
        _text(headers, fmt.content_type, required=False) or wire.CONTENT_TYPE_JSON
        if has_content_type
        else ""  # a producer that names none: see decode_payload
    )
    aggregate_id = key.decode(errors="replace")
    if not content_type and len(key) > 1 and key[:1] == key[-1:] == b'"':
        aggregate_id = _json_string(aggregate_id)  # a key through JsonConverter: "42"
    event_id, source_event_id = event_id_of(raw_id, record.topic, aggregate_id)
    return Event(
        event_id=event_id,
        event_type=event_type,
        aggregate_type=aggregate_type,
        aggregate_id=aggregate_id,
        aggregate_version=version,
        occurred_at=occurred_at,
        trace_id=_text(headers, fmt.traceparent, required=False) or None,
        content_type=content_type,
        payload=None,
        value=bytes(record.value or b""),
        topic=record.topic,
        partition=record.partition,
        offset=record.offset,
        causation_id=_text(headers, fmt.causation_id, required=False) or None,
        source_event_id=source_event_id,
    )


def decode(record: ConsumedRecord, fmt: wire.WireFormat = wire.DEFAULT_FORMAT) -> Event:
    """The envelope and its payload (`decode_payload`, no Avro): raises `PoisonRecord`,
    or `UndecodablePayload` carrying the envelope when only the payload is at fault."""
    envelope = decode_envelope(record, fmt)
    try:
        payload = decode_payload(envelope.content_type, envelope.event_type, envelope.value)
    except PoisonRecord as e:
        raise UndecodablePayload(str(e), envelope) from e
    return envelope.with_payload(payload)


def _json_string(text: str) -> str:
    try:
        decoded = json.loads(text)
    except ValueError:
        return text
    return decoded if isinstance(decoded, str) else text


def _version(text: str | None) -> int | None:
    """The aggregate version a header carries: None when absent or 0 (unversioned)."""
    try:
        version = int(text) if text else None
    except ValueError as e:
        raise PoisonRecord(f"header 'aggregate_version' is not an integer: {text!r}") from e
    if not version:
        return None  # 0 is the contract's "unversioned"
    if not 0 < version <= MAX_VERSION:
        raise PoisonRecord(
            f"header 'aggregate_version' is {version}, outside 0..{MAX_VERSION} (a bigint)"
        )
    return version
