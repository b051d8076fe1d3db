"""Any record the consumer cannot decode or store is poison (audit 26, cases 6 and 7): it
is dead-lettered once, with the reason, and the consumer moves on to the next record,
instead of crashing on it at every restart or republishing it with the partition stuck.
Real PostgreSQL, the consumer's real pipeline (the harness)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from cdcbox.consumer import Event, Handler, Outcome
from cdcbox.names import DbNames
from cdcbox.producer import NewEvent
from cdcbox.testing import Harness
from cdcbox.testing.harness import Record
from tests.helpers import unique

pytestmark = pytest.mark.integration


@dataclasses.dataclass
class Amount:
    cents: int

    def __post_init__(self) -> None:
        if self.cents < 0:
            raise ValueError("an amount is never negative")


def recorder(aggregate: str, typed: bool = False) -> Any:
    class Recorder(Handler):
        consumer_name = unique("c")
        aggregate_types = (aggregate,)
        event_types = frozenset({"Paid"})
        payload_types = {"Paid": Amount} if typed else {}

        def __init__(self) -> None:
            self.applied: list[str] = []

        def handle(self, event: Event, conn: psycopg.Connection[Any]) -> None:
            self.applied.append(event.aggregate_id)

    return Recorder()


def altered(record: Record, **changes: Any) -> Record:
    return dataclasses.replace(record, **changes)


def with_header(name: str, value: bytes) -> Callable[[Record], Record]:
    def change(record: Record) -> Record:
        headers = [(k, value if k == name else v) for k, v in record.headers]
        return altered(record, headers=headers)

    return change


POISON: dict[str, Callable[[Record], Record]] = {
    "nested-json": lambda r: altered(r, value=b"[" * 100_000 + b"]" * 100_000),
    "nul-in-key": lambda r: altered(r, key=b"o\x00x"),
    "nul-in-event-type": with_header("event_type", b"Pa\x00id"),
    "nul-in-traceparent": with_header("traceparent", b"00-\x00"),
    "version-over-bigint": with_header("aggregate_version", str(2**63).encode()),
}


@pytest.mark.parametrize("batch_mode", [False, True], ids=["per-record", "batch"])
@pytest.mark.parametrize("poison", sorted(POISON))
def test_a_record_that_cannot_be_decoded_or_stored_is_dead_lettered_once(
    database: str, cdcbox_schema: DbNames, poison: str, batch_mode: bool
) -> None:
    aggregate = unique("Pay")
    handler = recorder(aggregate)
    with Harness(database, [handler], names=cdcbox_schema, batch_mode=batch_mode) as harness:
        bad = POISON[poison](harness.record(NewEvent(aggregate, "o1", "Paid", {"cents": 1}, 1)))
        good = harness.record(NewEvent(aggregate, "o2", "Paid", {"cents": 2}, 1))
        ended = harness.send(bad, good)
        letters = harness.dead_letters(bad.topic)
    assert handler.applied == ["o2"]
    assert ended[Outcome.DEAD_LETTERED] == 1
    assert len(letters) == 1


@pytest.mark.parametrize("batch_mode", [False, True], ids=["per-record", "batch"])
def test_a_typed_payload_whose_own_check_raises_is_dead_lettered(
    database: str, cdcbox_schema: DbNames, batch_mode: bool
) -> None:
    aggregate = unique("Pay")
    handler = recorder(aggregate, typed=True)
    with Harness(database, [handler], names=cdcbox_schema, batch_mode=batch_mode) as harness:
        ended = harness.send(
            NewEvent(aggregate, "o1", "Paid", {"cents": -5}, 1),
            NewEvent(aggregate, "o2", "Paid", {"cents": 5}, 1),
        )
        letters = harness.dead_letters(harness.record(NewEvent(aggregate, "x", "Paid", {})).topic)
    assert handler.applied == ["o2"]
    assert ended[Outcome.DEAD_LETTERED] == 1
    assert b"never negative" in (dict(letters[0].headers)["cdcbox.error.message"] or b"")
