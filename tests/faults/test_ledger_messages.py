"""The fault ledger over the outbox without a table (issue 35): writers commit a business
row and emit its event as a logical decoding message in one transaction; the messages
connector publishes them; the consumer processes apply them. Each row breaks one part
mid-stream and requires the same as the table's rows: nothing lost, effects exactly
once, order held, no rolled-back event delivered, no copy on the topic. The last two rows
drop the slot mid-stream: with the producer's slot check nothing is lost (the writers'
transactions are refused), without it the events emitted meanwhile are."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest

from cdcbox import wire
from cdcbox.connect.offsets import delete_forgetting_offsets
from cdcbox.ids import uuid7
from cdcbox.producer.outbox import NewEvent, Outbox
from cdcbox.stack.endpoints import Endpoints
from tests.faults import ledger
from tests.faults.conftest import NativeParts, connector_running
from tests.faults.messages import MessagesOutbox, messages_outbox, record_business
from tests.faults.scenario import Scenario, assert_exact_on_the_topic
from tests.faults.test_ledger_cdc import (
    BIG_TRANSACTION,
    sigkill,
    walsender_and_consumer_sessions_terminated,
)
from tests.helpers import drop_slot_once_released, eventually

pytestmark = [pytest.mark.e2e, pytest.mark.faults, pytest.mark.timeout(420)]


@pytest.fixture
def outbox(stack: Endpoints, parts: NativeParts) -> Iterator[MessagesOutbox]:
    with messages_outbox(stack, parts.client) as made:
        yield made


def running(parts: NativeParts, outbox: MessagesOutbox) -> None:
    connector_running(parts.client, connector=outbox.connector)


def test_connect_sigkilled_inside_a_20000_event_transaction(
    stack: Endpoints, parts: NativeParts, outbox: MessagesOutbox, tmp_path: Path
) -> None:
    published_when_killed: list[int] = []

    def fault(s: Scenario) -> None:
        topic = wire.topic_for(s.aggregate_type)
        before = ledger.topic_size(stack.bootstrap_servers, topic)
        events = [
            NewEvent(
                s.aggregate_type,
                f"big-{i % 100}",
                "Changed",
                {"n": i // 100 + 1},
                aggregate_version=i // 100 + 1,
                event_id=uuid7(),
            )
            for i in range(BIG_TRANSACTION)
        ]
        with psycopg.connect(stack.dsn) as conn, conn.transaction():
            for i, event in enumerate(events):
                record_business(conn, outbox.names, event, i // 100 + 1)
            Outbox(outbox.names, messages=True).append_many(conn, events)

        def published() -> int:
            return ledger.topic_size(stack.bootstrap_servers, topic) - before

        eventually(lambda: published() > 500, timeout=60, interval=0.05, what="under way")
        published_when_killed.append(published())
        sigkill(parts.connect)
        parts.connect.start()
        connector_running(parts.client)
        running(parts, outbox)

    scenario = Scenario(
        "messages: connect SIGKILL inside a 20,000-event transaction",
        stack,
        tmp_path,
        messages=outbox,
    )
    result = scenario.run(fault)
    assert published_when_killed[0] < BIG_TRANSACTION  # the kill landed while publishing
    assert_exact_on_the_topic(result, scenario)


def test_postgresql_sigkilled(
    stack: Endpoints, parts: NativeParts, outbox: MessagesOutbox, tmp_path: Path
) -> None:
    def fault(s: Scenario) -> None:
        sigkill(parts.postgres)
        parts.postgres.start()
        connector_running(parts.client)
        running(parts, outbox)
        errors = s.writers.errors
        eventually(lambda: s.writers.attempted > errors + 50, timeout=60, what="writers back")

    scenario = Scenario("messages: postgres SIGKILL", stack, tmp_path, messages=outbox)
    result = scenario.run(fault)
    assert scenario.writers.errors > 0
    assert_exact_on_the_topic(result, scenario)


def test_walsender_and_consumer_sessions_terminated_repeatedly(
    stack: Endpoints, parts: NativeParts, outbox: MessagesOutbox, tmp_path: Path
) -> None:
    def fault(s: Scenario) -> None:
        walsender_and_consumer_sessions_terminated(s)
        running(parts, outbox)

    scenario = Scenario(
        "messages: walsender + sessions terminated x3", stack, tmp_path, messages=outbox
    )
    assert_exact_on_the_topic(scenario.run(fault), scenario)


def slot_dropped_and_recreated(
    stack: Endpoints, parts: NativeParts, outbox: MessagesOutbox
) -> Callable[[Scenario], None]:
    """Everything committed so far published, the connector removed with its offsets and
    its slot dropped (as an operator's forced `slot drop` or an invalidation would), 300
    transactions written without a slot, then the slot recreated and the connector
    applied again (from its new slot: Debezium refuses a stored position the new slot
    does not hold)."""

    def fault(s: Scenario) -> None:
        with s.writers.paused():
            s.settle()  # what committed before is applied: the drop loses none of it
            delete_forgetting_offsets(parts.client, outbox.connector)
            drop_slot_once_released(stack.dsn, outbox.slot)
        s.stream_on(300)
        outbox.recreate_slot(stack.dsn)
        outbox.apply(parts.client)
        running(parts, outbox)

    return fault


def test_slot_dropped_mid_stream_nothing_is_emitted_into_the_hole(
    stack: Endpoints, parts: NativeParts, outbox: MessagesOutbox, tmp_path: Path
) -> None:
    scenario = Scenario(
        "messages: slot dropped and recreated mid-stream", stack, tmp_path, messages=outbox
    )
    result = scenario.run(slot_dropped_and_recreated(stack, parts, outbox))
    assert scenario.writers.errors >= 100  # refused while the slot was gone
    assert_exact_on_the_topic(result, scenario)


def test_without_the_slot_check_the_same_drop_loses_events(
    stack: Endpoints, parts: NativeParts, outbox: MessagesOutbox, tmp_path: Path
) -> None:
    scenario = Scenario(
        "messages: slot dropped and recreated (safeguard off: slot check)",
        stack,
        tmp_path,
        messages=outbox,
        unguarded=True,
        safeguard_off="slot check",
        settle_timeout_s=30,
    )
    result = scenario.run(slot_dropped_and_recreated(stack, parts, outbox))
    assert scenario.writers.errors == 0  # nothing refused them
    assert result.lost > 0, result
