"""The circuit breaker's shared state on a real MariaDB, as test_breaker runs it on
PostgreSQL: two `CircuitBreaker`s over `MariaDbBreakerState` are two processes of one
consumer name."""

from __future__ import annotations

import pytest

from cdcbox.consumer.breaker import BreakerPolicy, CircuitBreaker
from cdcbox.mariadb.consumer_state import MariaDbBreakerState
from cdcbox.mariadb.session import MariaDbSession
from cdcbox.names import DbNames
from tests.helpers import unique

pytestmark = pytest.mark.integration
POLICY = BreakerPolicy(failing_aggregates=3, window_s=30)


def breaker() -> CircuitBreaker:
    return CircuitBreaker(POLICY, state=MariaDbBreakerState())


def test_it_opens_on_distinct_aggregates_across_processes_and_closes_only_on_success(
    mariadb: MariaDbSession,
) -> None:
    consumer = unique("c")
    first, second = breaker(), breaker()
    assert not first.holds(mariadb, consumer, ("order", "a"))  # a poison message
    assert not first.holds(mariadb, consumer, ("order", "a"))  # one aggregate twice is one
    assert not first.holds(mariadb, consumer, ("order", "b"))  # a and b: 2 < 3
    assert second.holds(mariadb, consumer, ("order", "c"))  # a, b and c: the other opens it
    assert second.is_open(consumer) and not first.is_open(consumer)
    assert first.holds(mariadb, consumer, ("order", "z"))  # open for every process

    mariadb.execute(
        f"UPDATE {DbNames().breaker_failures} SET failed_at = failed_at - INTERVAL 1 HOUR "
        "WHERE consumer_name = %s",
        (consumer,),
    )
    assert first.holds(mariadb, consumer, ("order", "y"))  # aged-out failures do not close it

    tripped = second.record_success(mariadb, consumer)
    assert tripped is not None  # the success closes it and says when the trip began
    assert first.record_success(mariadb, consumer) == tripped
    assert first.record_success(mariadb, consumer) is None
    assert not first.holds(mariadb, consumer, ("order", "d"))  # failures before the close
    assert not first.holds(mariadb, consumer, ("order", "e"))  # are gone: d and e are 2 < 3


def test_failures_outside_the_window_do_not_count(mariadb: MariaDbSession) -> None:
    consumer, first = unique("c"), breaker()
    assert not first.holds(mariadb, consumer, ("order", "a"))
    assert not first.holds(mariadb, consumer, ("order", "b"))
    mariadb.execute(
        f"UPDATE {DbNames().breaker_failures} SET failed_at = failed_at - INTERVAL 31 SECOND "
        "WHERE consumer_name = %s",
        (consumer,),
    )
    assert not first.holds(mariadb, consumer, ("order", "c"))  # a and b aged out of 30 s
