"""Records of producers that are not cdcbox, as Debezium's Outbox Event Router emits them
configured as its documentation shows (`id` header, key = aggregate id, the type in an
`eventType` header or none, the aggregate type only in the topic, no content type), and
as producers configured otherwise do, through a handler's `WireFormat` (no services)."""

from __future__ import annotations

import json
import uuid

import pytest

from cdcbox import wire
from cdcbox.errors import ConfigError
from cdcbox.event import decode
from tests.helpers import a_record

DEBEZIUM_ID = "0f4e5d2a-3c1b-4a9e-8d7f-6e5d4c3b2a19"
DOCUMENT = {"id": 1, "customer": "c-7", "lines": []}


def routed(value: bytes, **extra: bytes) -> object:
    """A record as the router emits it by default, plus `extra` headers."""
    headers: list[tuple[str, bytes | None]] = [("id", DEBEZIUM_ID.encode()), *extra.items()]
    return a_record(key=b"42", value=value, headers=headers, topic="outbox.event.Order")


@pytest.mark.parametrize(
    "value",
    [
        json.dumps(DOCUMENT).encode(),  # expanded (table.expand.json.payload, schemas off)
        json.dumps(json.dumps(DOCUMENT)).encode(),  # jsonb as a JSON string (the default)
        json.dumps({"schema": {"type": "string"}, "payload": json.dumps(DOCUMENT)}).encode(),
    ],
    ids=["expanded", "json-string", "schema-envelope"],
)
def test_the_routers_defaults_decode_with_no_configuration(value: bytes) -> None:
    event = decode(routed(value, eventType=b"OrderCreated"))  # type: ignore[arg-type]
    assert event.event_id == uuid.UUID(DEBEZIUM_ID) and event.source_event_id is None
    assert (event.aggregate_type, event.aggregate_id) == ("Order", "42")  # from the topic
    assert event.event_type == "OrderCreated"  # the documented eventType placement
    assert event.payload == DOCUMENT
    assert event.aggregate_version is None and event.content_type == ""


def test_bytes_that_are_not_json_are_handed_over_as_bytes() -> None:
    assert decode(routed(b"\x08\x96\x01")).payload == b"\x08\x96\x01"  # type: ignore[arg-type]


def test_an_event_without_a_type_has_none_or_the_formats_default() -> None:
    assert decode(routed(b"{}")).event_type == ""  # type: ignore[arg-type]
    fmt = wire.WireFormat(default_event_type="OrderChanged")
    assert decode(routed(b"{}"), fmt=fmt).event_type == "OrderChanged"  # type: ignore[arg-type]


def test_ids_that_are_not_uuids_map_to_one_key_and_keep_their_text() -> None:
    """Debezium lets the id column be any type: every copy of `order-42-created` gets the
    same inbox key, and logs show the id as the producer wrote it."""
    first = a_record(key=b"42", headers=[("id", b"order-42-created")], topic="outbox.event.Order")
    copy = a_record(key=b"42", headers=[("id", b"order-42-created")], topic="outbox.event.Order")
    other = a_record(key=b"42", headers=[("id", b"order-42-paid")], topic="outbox.event.Order")
    a, b, c = decode(first), decode(copy), decode(other)
    assert a.event_id == b.event_id != c.event_id
    assert a.event_id == wire.foreign_event_key("outbox.event.Order", "42", "order-42-created")
    assert a.id_text == "order-42-created" and "order-42-created" in a.log_fields
    assert a.log_extra["event_id"] == "order-42-created"


def test_a_format_reads_other_header_names_and_topics() -> None:
    """A producer routing by another column onto `<type>.events`, with its own header
    names (as the Quarkus extension's configuration allows)."""
    fmt = wire.WireFormat(
        event_id="eventId",
        event_type=("type",),
        aggregate_version=("version",),
        topic_pattern="{aggregate_type}.events",
    )
    record = a_record(
        key=b"c-7",
        value=b'{"a":1}',
        headers=[("eventId", b"e-1"), ("type", b"CustomerMoved"), ("version", b"4")],
        topic="customer.events",
    )
    event = decode(record, fmt=fmt)
    assert (event.aggregate_type, event.event_type, event.aggregate_version) == (
        "customer",
        "CustomerMoved",
        4,
    )
    assert fmt.topic("customer") == "customer.events"
    assert fmt.aggregate_type_of("customer.other") is None


def test_a_topic_pattern_must_name_the_aggregate_type_once() -> None:
    with pytest.raises(ConfigError, match=r"must hold \{aggregate_type\} once"):
        wire.WireFormat(topic_pattern="orders")


def test_cdcbox_records_decode_as_before() -> None:
    """The contract's own headers win; its JSON is JSON (a JSON string stays a string)."""
    record = a_record(
        value=json.dumps("{not unwrapped}").encode(),
        headers=[
            ("id", DEBEZIUM_ID.encode()),
            ("event_type", b"Noted"),
            ("aggregate_type", b"order"),
            ("content-type", b"application/json"),
        ],
    )
    event = decode(record)
    assert (event.payload, event.content_type) == ("{not unwrapped}", "application/json")


def test_a_key_through_jsonconverter_is_the_aggregate_id() -> None:
    record = a_record(key=b'"42"', headers=[("id", b"e1")], topic="outbox.event.Order")
    assert decode(record).aggregate_id == "42"
