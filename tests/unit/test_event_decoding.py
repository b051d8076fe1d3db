"""Decoding records of the wire contract; poison records are named precisely."""

from __future__ import annotations

import uuid

import pytest

from cdcbox.errors import PoisonRecord
from cdcbox.event import decode
from cdcbox.testing.harness import Record
from tests.helpers import a_record


def headers(**overrides: bytes | None) -> list[tuple[str, bytes | None]]:
    base: dict[str, bytes | None] = {
        "id": str(uuid.UUID(int=1)).encode(),
        "event_type": b"OrderCreated",
        "aggregate_type": b"order",
        "aggregate_version": b"3",
        "occurred_at": b"2026-12-02T13:54:18.539394Z",
        "traceparent": None,
        "content-type": b"application/json",
    }
    base.update(overrides)
    return [
        (k, v)
        for k, v in base.items()
        if k not in {k for k, v in overrides.items() if v is None and k != "traceparent"}
    ]


def test_decodes_every_field() -> None:
    event = decode(a_record(headers=headers()))
    assert event.event_id == uuid.UUID(int=1)
    assert (event.event_type, event.aggregate_type, event.aggregate_id) == (
        "OrderCreated",
        "order",
        "o-1",
    )
    assert event.aggregate_version == 3
    assert event.occurred_at is not None and event.occurred_at.year == 2026
    assert event.trace_id is None
    assert event.payload == {"a": 1}
    assert (event.topic, event.partition, event.offset) == ("outbox.event.order", 0, 7)


@pytest.mark.parametrize(
    ("record", "reason"),
    [
        (a_record(headers=headers(id=None)), "missing header 'id'"),
        (a_record(headers=headers(id=b"  ")), "header 'id' \\(the event id\\) is empty"),
        (
            a_record(headers=headers(aggregate_type=None), topic="orders"),
            "no aggregate type: no header 'aggregate_type' and the topic 'orders' does not "
            "match 'outbox.event.{aggregate_type}'",
        ),
        (a_record(headers=headers(aggregate_version=b"v3")), "not an integer"),
        (a_record(headers=headers(occurred_at=b"yesterday")), "not ISO-8601"),
        (a_record(value=b"{not json", headers=headers()), "not valid JSON"),
        (a_record(key=None, headers=headers()), "no key"),
    ],
)
def test_poison_records_are_refused_with_the_reason(record: Record, reason: str) -> None:
    with pytest.raises(PoisonRecord, match=reason):
        decode(record)


def test_binary_payloads_are_passed_through_undecoded() -> None:
    record = a_record(
        value=b"\xc3\x01binary", headers=headers(**{"content-type": b"application/octet-stream"})
    )
    assert decode(record).payload == b"\xc3\x01binary"
