"""Typed payloads: a handler declares a dataclass or a pydantic model per event type and
gets a validated instance; a payload that does not fit is dead-lettered, with its
aggregate parked, like any undecodable payload (through the real pipeline, no Kafka)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

import psycopg
import pydantic
import pytest

from cdcbox import wire
from cdcbox.consumer import Event, Handler, Outcome
from cdcbox.errors import ConfigError
from cdcbox.producer.outbox import NewEvent
from cdcbox.testing import Harness
from tests.helpers import unique

pytestmark = pytest.mark.integration


@dataclass(frozen=True)
class BookingData:
    account: str
    cents: int
    note: str = ""


class BookingModel(pydantic.BaseModel):
    account: str
    cents: pydantic.PositiveInt


def booking_handler(aggregate_type: str, payload_type: type) -> Handler:
    class Bookings(Handler):
        consumer_name = unique("bookings")
        aggregate_types = (aggregate_type,)
        event_types = frozenset({"Booked"})
        payload_types: ClassVar[dict[str, type]] = {"Booked": payload_type}
        seen: ClassVar[list[Any]] = []

        def handle(self, event: Event, conn: psycopg.Connection[Any]) -> None:
            self.seen.append(event.payload)

    return Bookings()


@pytest.mark.parametrize("payload_type", [BookingData, BookingModel], ids=["dataclass", "pydantic"])
def test_a_handler_gets_its_payload_type_and_poison_is_dead_lettered(
    cdcbox_harness: Callable[..., Harness], cdcbox_aggregate_type: str, payload_type: type
) -> None:
    handler = booking_handler(cdcbox_aggregate_type, payload_type)
    harness = cdcbox_harness([handler])
    booked = lambda account, cents: NewEvent(  # noqa: E731
        cdcbox_aggregate_type, account, "Booked", {"account": account, "cents": cents}
    )
    assert harness.send(booked("a", 1999)) == Counter({Outcome.PROCESSED: 1})
    assert handler.seen == [payload_type(account="a", cents=1999)]  # type: ignore[attr-defined]
    # Not an int: refused before the handler runs, dead-lettered; b's next event is parked.
    assert harness.send(booked("b", "lots"), booked("b", 5)) == Counter(
        {Outcome.DEAD_LETTERED: 1, Outcome.PARKED: 1}
    )
    letters = harness.dead_letters(wire.topic_for(cdcbox_aggregate_type))
    message = (dict(letters[0].headers)["cdcbox.error.message"] or b"").decode()
    assert f"not a valid {payload_type.__name__}" in message and "cents" in message
    assert len(handler.seen) == 1  # type: ignore[attr-defined]


def test_a_payload_type_for_an_event_type_it_does_not_take_is_refused_at_start(
    cdcbox_harness: Callable[..., Harness], cdcbox_aggregate_type: str
) -> None:
    handler = booking_handler(cdcbox_aggregate_type, BookingData)
    type(handler).payload_types = {"Shipped": BookingData}
    with pytest.raises(ConfigError, match="names 'Shipped', which is not in its event_types"):
        cdcbox_harness([handler])
