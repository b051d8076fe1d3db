"""The schema registry down (its process stopped by pid) while events are produced and
consumed: nothing is lost, half-written or dead-lettered for it.

- producing: an append whose schema id is not yet known refuses (`RegistryUnavailable`)
  before anything is written; one whose id the process has cached goes on;
- consuming: records whose writer schema the consumer has not fetched wait (counted
  waits, no attempt charged, nothing dead-lettered) and are applied once it is back.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from cdcbox.consumer import Outcome
from cdcbox.errors import RegistryUnavailable
from cdcbox.producer.outbox import NewEvent, Outbox
from cdcbox.stack.config import StackConfig
from cdcbox.stack.endpoints import Endpoints
from cdcbox.stack.registry import NativeRegistry
from tests.e2e.conftest import count_effects, recording_handler
from tests.e2e.test_schema_registry import ORDER, registered_catalogue
from tests.helpers import eventually, unique

pytestmark = pytest.mark.e2e
EVENTS = 20


@pytest.fixture
def registry(native_stack: StackConfig) -> Iterator[NativeRegistry]:
    """The stack's registry, running again after the test whatever it did."""
    process = NativeRegistry(native_stack)
    assert process.running(), "the stack's schema registry is not running"
    yield process
    process.start()


def orders(aggregate_type: str, count: int) -> list[NewEvent]:
    return [
        NewEvent(aggregate_type, f"o{i}", "OrderCreated", {**ORDER, "order_id": f"o{i}"}, 1)
        for i in range(count)
    ]


def outbox_rows(dsn: str, aggregate_type: str) -> int:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT count(*) FROM outbox_event WHERE aggregate_type = %s", (aggregate_type,)
        ).fetchone()
    assert row is not None
    return int(row[0])


def business_change_and_events(
    conn: psycopg.Connection[Any], outbox: Outbox, aggregate_type: str
) -> None:
    """A business row (in e2e_effect) and three events, in one transaction."""
    with conn.transaction():
        conn.execute(
            "INSERT INTO e2e_effect (consumer_name, event_id, aggregate_id, headers) "
            "VALUES (%s, gen_random_uuid(), 'x', '{}')",
            (aggregate_type,),
        )
        outbox.append_many(conn, orders(aggregate_type, 3))


def test_registry_down_while_producing(stack: Endpoints, registry: NativeRegistry) -> None:
    aggregate_type = unique("order")
    warm = Outbox(schemas=registered_catalogue(stack))
    with psycopg.connect(stack.dsn) as conn, conn.transaction():
        warm.append(conn, orders(aggregate_type, 1)[0])  # its id cached from here on
    registry.stop()
    cold = Outbox(schemas=registered_catalogue(stack))
    with psycopg.connect(stack.dsn) as conn:
        with pytest.raises(RegistryUnavailable, match="schema registry .* did not answer"):
            business_change_and_events(conn, cold, aggregate_type)
        business_change_and_events(conn, warm, aggregate_type)
    # The refused transaction left nothing, its business row neither; the cached id wrote.
    assert outbox_rows(stack.dsn, aggregate_type) == 4
    assert count_effects(stack.dsn, aggregate_type) == 1


def test_registry_down_while_consuming(
    stack: Endpoints, registry: NativeRegistry, run_consumer: Any
) -> None:
    aggregate_type, consumer = unique("order"), unique("c")
    with psycopg.connect(stack.dsn) as conn, conn.transaction():
        Outbox(schemas=registered_catalogue(stack)).append_many(
            conn, orders(aggregate_type, EVENTS)
        )
    registry.stop()
    handler = recording_handler(consumer, aggregate_type, {"OrderCreated"})
    with run_consumer([handler], group=consumer, schemas=registered_catalogue(stack)) as running:
        waits = running.stats.metrics.registry_outage_waits
        eventually(lambda: waits._value.get() >= 2, what="the consumer waiting for the registry")
        assert count_effects(stack.dsn, consumer) == 0
        registry.start()
        eventually(lambda: count_effects(stack.dsn, consumer) == EVENTS, what="every event")
        assert running.stats[Outcome.DEAD_LETTERED] == 0
        assert running.stats[Outcome.PROCESSED] == EVENTS
