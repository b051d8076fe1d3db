"""The circuit breaker's shared state against real PostgreSQL: two `CircuitBreaker`s are
two processes of one consumer name."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from cdcbox.consumer.breaker import BreakerPolicy, CircuitBreaker
from tests.helpers import unique

pytestmark = pytest.mark.integration
POLICY = BreakerPolicy(failing_aggregates=3, window_s=30)


def test_it_opens_on_distinct_aggregates_across_processes_and_closes_only_on_success(
    db: psycopg.Connection[Any],
) -> None:
    consumer = unique("c")
    first, second = CircuitBreaker(POLICY), CircuitBreaker(POLICY)
    assert not first.holds(db, consumer, ("order", "a"))  # a poison message: dead-letter it
    assert not first.holds(db, consumer, ("order", "a"))  # one aggregate twice is still one
    assert not first.holds(db, consumer, ("order", "b"))  # a and b: 2 < 3
    assert second.holds(db, consumer, ("order", "c"))  # a, b and c: the other process opens
    assert second.is_open(consumer) and not first.is_open(consumer)
    assert first.holds(db, consumer, ("order", "z"))  # open for every process of the name

    db.execute(
        "UPDATE consumer_breaker_failure SET failed_at = now() - interval '1 hour' "
        "WHERE consumer_name = %s",
        (consumer,),
    )
    assert first.holds(db, consumer, ("order", "y"))  # aged-out failures do not close it

    tripped = second.record_success(db, consumer)
    assert tripped is not None  # the success closes it and says when the trip began
    assert first.record_success(db, consumer) == tripped  # each holder replays its own
    assert first.record_success(db, consumer) is None  # nothing held any more
    assert not first.is_open(consumer) and not second.is_open(consumer)
    assert not first.holds(db, consumer, ("order", "d"))  # failures before the close are gone
    assert not first.holds(db, consumer, ("order", "e"))


def test_a_disabled_breaker_never_holds(db: psycopg.Connection[Any]) -> None:
    consumer, breaker = unique("c"), CircuitBreaker(BreakerPolicy(enabled=False))
    assert not any(breaker.holds(db, consumer, ("order", a)) for a in "abcdefg")
