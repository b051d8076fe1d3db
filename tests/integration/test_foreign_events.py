"""Events of producers that are not cdcbox, through the consumer's real pipeline on real
PostgreSQL (the harness): records built as Debezium's Outbox Event Router emits them are
applied once, their redelivered copies dropped by the inbox (ids that are not UUIDs
included), a placed version header guards order, a handler can take untyped events, and
a poison record's log line names its event id."""

from __future__ import annotations

import base64
import json
import logging
import random
from collections import Counter
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from cdcbox.consumer import ANY_EVENT_TYPE, Event, Handler, Outcome, WireFormat
from cdcbox.testing import Harness
from tests.helpers import a_record, unique

pytestmark = pytest.mark.integration
# 4000 bytes PostgreSQL cannot compress below its btree limit (~2.7 KB).
NOISE = base64.b64encode(random.Random(33).randbytes(3000))


def recording(aggregate_type: str, event_types: frozenset[str], fmt: WireFormat) -> Any:
    class Recorder(Handler):
        consumer_name = unique("foreign")
        aggregate_types = (aggregate_type,)
        wire_format = fmt

        def __init__(self) -> None:
            self.seen: list[tuple[str, str, Any]] = []

        def handle(self, event: Event, conn: psycopg.Connection[Any]) -> None:
            self.seen.append((event.id_text, event.event_type, event.payload))

    Recorder.event_types = event_types
    return Recorder()


def router_record(
    topic: str, event_id: str, key: str, payload: Any, offset: int, **headers: str
) -> Any:
    """A record as the router emits it by default: `id` header, key, JSON value."""
    return a_record(
        key=key.encode(),
        value=json.dumps(payload).encode(),
        headers=[("id", event_id.encode()), *((k, v.encode()) for k, v in headers.items())],
        topic=topic,
        offset=offset,
    )


def test_router_records_are_applied_once_whatever_their_ids(
    cdcbox_harness: Callable[..., Harness], cdcbox_aggregate_type: str
) -> None:
    topic = f"outbox.event.{cdcbox_aggregate_type}"
    handler = recording(cdcbox_aggregate_type, frozenset({"Created"}), WireFormat())
    harness = cdcbox_harness([handler])
    records = [
        router_record(
            topic, "0f4e5d2a-3c1b-4a9e-8d7f-6e5d4c3b2a19", "a", {"n": 1}, 0, eventType="Created"
        ),
        router_record(topic, "order-7-created", "b", {"n": 2}, 1, eventType="Created"),
        router_record(topic, "12345", "c", json.dumps({"n": 3}), 2, eventType="Created"),
    ]
    assert harness.send(*records) == Counter({Outcome.PROCESSED: 3})
    assert harness.send(*records) == Counter({Outcome.DUPLICATE: 3})
    assert [(i, p) for i, _, p in handler.seen] == [
        ("0f4e5d2a-3c1b-4a9e-8d7f-6e5d4c3b2a19", {"n": 1}),
        ("order-7-created", {"n": 2}),
        ("12345", {"n": 3}),  # a JSON document inside a JSON string
    ]


def test_a_placed_version_header_guards_order(
    cdcbox_harness: Callable[..., Harness], cdcbox_aggregate_type: str
) -> None:
    fmt = WireFormat(aggregate_version=("version",))
    handler = recording(cdcbox_aggregate_type, frozenset({"Moved"}), fmt)
    harness = cdcbox_harness([handler])
    topic = f"outbox.event.{cdcbox_aggregate_type}"

    def moved(i: int, version: int) -> Any:
        return router_record(topic, f"m{i}", "c1", {}, i, eventType="Moved", version=str(version))

    assert harness.send(moved(1, 1), moved(2, 2), moved(3, 1)) == Counter(
        {Outcome.PROCESSED: 2, Outcome.STALE: 1}
    )


def test_a_handler_takes_untyped_events_by_default_type_or_all_of_them(
    cdcbox_harness: Callable[..., Harness], cdcbox_aggregate_type: str
) -> None:
    topic = f"outbox.event.{cdcbox_aggregate_type}"
    named = recording(
        cdcbox_aggregate_type,
        frozenset({"CustomerChanged"}),
        WireFormat(default_event_type="CustomerChanged"),
    )
    everything = recording(cdcbox_aggregate_type, frozenset({ANY_EVENT_TYPE}), WireFormat())
    harness = cdcbox_harness([named, everything])
    untyped = router_record(topic, "u1", "c1", {"x": 1}, 0)
    typed = router_record(topic, "t1", "c1", {"x": 2}, 1, eventType="Other")
    assert harness.send(untyped, typed) == Counter({Outcome.PROCESSED: 3})
    assert [(i, t) for i, t, _ in named.seen] == [("u1", "CustomerChanged")]
    assert [(i, t) for i, t, _ in everything.seen] == [("u1", ""), ("t1", "Other")]


def test_another_topic_pattern_and_header_names(
    cdcbox_harness: Callable[..., Harness], cdcbox_aggregate_type: str
) -> None:
    """A producer routing onto `<aggregate type>.events` with its own id and type headers."""
    fmt = WireFormat(
        event_id="eventId", event_type=("type",), topic_pattern="{aggregate_type}.events"
    )
    handler = recording(cdcbox_aggregate_type, frozenset({"Shipped"}), fmt)
    assert handler.subscribed_topics() == (f"{cdcbox_aggregate_type}.events",)
    harness = cdcbox_harness([handler])
    record = a_record(
        key=b"s1",
        value=b'{"carrier":"x"}',
        headers=[("eventId", b"e-1"), ("type", b"Shipped")],
        topic=f"{cdcbox_aggregate_type}.events",
    )
    assert harness.send(record) == Counter({Outcome.PROCESSED: 1})
    assert handler.seen == [("e-1", "Shipped", {"carrier": "x"})]


def test_a_poison_record_is_dead_lettered_and_its_log_line_names_the_event_id(
    cdcbox_harness: Callable[..., Harness],
    cdcbox_aggregate_type: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    handler = recording(cdcbox_aggregate_type, frozenset({"Created"}), WireFormat())
    harness = cdcbox_harness([handler])
    keyless = a_record(
        key=None,
        headers=[("id", b"order-9-created"), ("eventType", b"Created")],
        topic=f"outbox.event.{cdcbox_aggregate_type}",
    )
    with caplog.at_level(logging.ERROR, logger="cdcbox"):
        assert harness.send(keyless) == Counter({Outcome.DEAD_LETTERED: 1})
    (line,) = [r for r in caplog.records if "dead-lettered" in r.getMessage()]
    assert "order-9-created" in line.getMessage()
    assert getattr(line, "event_id", None) == "order-9-created"
    assert len(harness.dead_letters(f"outbox.event.{cdcbox_aggregate_type}")) == 1


def test_ids_that_are_not_uuids_are_keyed_within_their_topic_and_aggregate(
    cdcbox_harness: Callable[..., Harness], cdcbox_aggregate_type: str
) -> None:
    """Audit 33, case 2: two services with `bigserial` ids, read by one handler, both
    send event id 1; a producer whose sequence restarted sends id 1 again for another
    aggregate. The old code keyed all of them by uuid5 of "1" alone: the later ones were
    silent DUPLICATEs. A redelivered copy is still one."""
    orders, billing = f"outbox.event.{cdcbox_aggregate_type}", f"billing.{cdcbox_aggregate_type}"

    class BothServices(Handler):
        consumer_name = unique("two-services")
        topics = (orders, billing)
        event_types = frozenset({ANY_EVENT_TYPE})

        def __init__(self) -> None:
            self.seen: list[tuple[str, str, Any]] = []

        def handle(self, event: Event, conn: psycopg.Connection[Any]) -> None:
            self.seen.append((event.topic, event.aggregate_id, event.payload))

    handler = BothServices()
    harness = cdcbox_harness([handler])
    outcomes = harness.send(
        router_record(orders, "1", "o-1", {"from": "orders"}, 0),
        router_record(billing, "1", "b-1", {"from": "billing"}, 0, aggregate_type="Invoice"),
        router_record(orders, "1", "o-2", {"after": "a sequence restart"}, 1),
        router_record(orders, "1", "o-1", {"from": "orders"}, 0),  # redelivered
    )
    assert outcomes == Counter({Outcome.PROCESSED: 3, Outcome.DUPLICATE: 1})
    assert [(t, a) for t, a, _ in handler.seen] == [
        (orders, "o-1"),
        (billing, "b-1"),
        (orders, "o-2"),
    ]


def test_a_record_one_wire_format_cannot_read_is_dead_lettered_for_its_handlers_only(
    cdcbox_harness: Callable[..., Harness], cdcbox_aggregate_type: str
) -> None:
    """Audit 33, case 3: two handlers read one topic, one with the default format, one
    with a format whose id header the record lacks. The old code dead-lettered the record
    for both (and the default handler applied later versions past it); now it is
    applied by the handler that can read it and dead-lettered for the other alone."""
    topic = f"outbox.event.{cdcbox_aggregate_type}"
    reads_it = recording(cdcbox_aggregate_type, frozenset({"Created"}), WireFormat())
    other = recording(cdcbox_aggregate_type, frozenset({"Created"}), WireFormat(event_id="msgId"))
    harness = cdcbox_harness([reads_it, other])
    record = router_record(topic, "e-1", "a-1", {"n": 1}, 0, eventType="Created")
    assert harness.send(record) == Counter({Outcome.PROCESSED: 1, Outcome.DEAD_LETTERED: 1})
    assert [seen[0] for seen in reads_it.seen] == ["e-1"] and other.seen == []
    (letter,) = harness.dead_letters(topic)
    assert dict(letter.headers)["cdcbox.consumer"] == other.consumer_name.encode()


@pytest.mark.parametrize(
    ("key", "headers", "reason"),
    [
        (NOISE, {"aggregate_version": "1"}, "the key (the aggregate id) is 4000 bytes"),
        (
            b"a-1",
            {"aggregate_version": "1", "aggregate_type": NOISE.decode()},
            "the aggregate type is 4000 bytes",
        ),
    ],
    ids=["key", "aggregate-type"],
)
def test_a_key_or_aggregate_type_too_long_to_index_is_poison(
    cdcbox_harness: Callable[..., Harness],
    cdcbox_aggregate_type: str,
    key: bytes,
    headers: dict[str, str],
    reason: str,
) -> None:
    """Audit 33, case 10: a foreign key or aggregate type over PostgreSQL's btree limit
    (~2.7 KB) could be neither claimed nor dead-lettered (the version, parked and
    unfinished-inbox keys index it). It is poison: dead-lettered once, with the reason."""
    topic = f"outbox.event.{cdcbox_aggregate_type}"
    handler = recording(cdcbox_aggregate_type, frozenset({ANY_EVENT_TYPE}), WireFormat())
    harness = cdcbox_harness([handler])
    record = router_record(topic, "e-1", key.decode(), {"n": 1}, 0, **headers)
    assert harness.send(record) == Counter({Outcome.DEAD_LETTERED: 1})
    (letter,) = harness.dead_letters(topic)
    assert reason in (dict(letter.headers)["cdcbox.error.message"] or b"").decode()
    assert handler.seen == []
