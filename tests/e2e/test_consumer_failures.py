"""Failures end as dead letters, retries or parked aggregates — never as lost records."""

from __future__ import annotations

import dataclasses
import re
import urllib.error
import urllib.request
from typing import Any

import psycopg
import pytest
from psycopg import sql

from cdcbox import wire
from cdcbox.consumer import Event, Outcome, RetryPolicy
from cdcbox.consumer.breaker import BreakerPolicy
from cdcbox.names import DbNames
from cdcbox.producer.columns import EVENT_COLUMNS
from cdcbox.producer.outbox import ISO_FORMAT, NewEvent, Outbox, event_row
from cdcbox.stack.endpoints import Endpoints
from tests.e2e.conftest import count_effects, effects
from tests.e2e.topics import read_topic
from tests.helpers import eventually, free_port, unique

pytestmark = pytest.mark.e2e
OUTBOX = Outbox()
PARTITIONS = 3  # of each outbox topic on the test stack
FAST_RETRY = RetryPolicy(max_attempts=3, initial_delay_s=0.01, max_delay_s=0.05)


def readyz(port: int) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as r:
            return r.status, r.read().decode().strip()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode().strip()


def dead_letters(stack: Endpoints, topic: str, expect: int) -> list[Any]:
    return read_topic(stack, topic, expect, timeout=30)


def write(dsn: str, events: list[NewEvent]) -> list[Any]:
    with psycopg.connect(dsn) as conn, conn.transaction():
        return OUTBOX.append_many(conn, events)


def write_unchecked(conn: psycopg.Connection[Any], event: NewEvent, payload: bytes) -> Any:
    """As a producer that is not cdcbox may write a row: raw SQL, the payload unchecked
    (`Outbox.append` refuses bytes declared JSON that are not JSON)."""
    row = [*dataclasses.replace(event_row(event), payload=payload).params()]
    conn.execute(
        sql.SQL(
            "INSERT INTO {} ({}, created_at, occurred_at) VALUES ({}, now(), "
            "to_char(now() AT TIME ZONE 'UTC', {}))"
        ).format(
            DbNames().table("outbox"),
            sql.SQL(", ").join(map(sql.Identifier, EVENT_COLUMNS)),
            sql.SQL(", ").join(sql.Placeholder() * len(row)),
            sql.Literal(ISO_FORMAT),
        ),
        row,
    )
    return row[0]


def test_undecodable_payload_is_dead_lettered_its_aggregate_parked_and_others_applied(
    stack: Endpoints, run_consumer: Any, recorder: Any
) -> None:
    aggregate_type, consumer = unique("order"), unique("c")
    with psycopg.connect(stack.dsn) as conn, conn.transaction():
        bad = write_unchecked(conn, NewEvent(aggregate_type, "a1", "Created", {}), b"{not json")
        later, other = OUTBOX.append_many(
            conn,
            [
                NewEvent(aggregate_type, "a1", "Created", {"ok": True}),
                NewEvent(aggregate_type, "a2", "Created", {"ok": True}),
            ],
        )
    handler = recorder(consumer, aggregate_type, {"Created"})
    with run_consumer([handler], group=consumer) as running:
        eventually(lambda: count_effects(stack.dsn, consumer) == 1, what="the other aggregate")
        eventually(lambda: running.stats[Outcome.DEAD_LETTERED] == 1, what="one dead letter")
        eventually(lambda: running.stats[Outcome.PARKED] == 1, what="a1's later event parked")
    topic = wire.topic_for(aggregate_type)
    letters = dead_letters(stack, topic + ".dlq", expect=2)
    headers = [dict(letter.headers) for letter in letters]
    assert [h["id"] for h in headers] == [str(bad).encode(), str(later).encode()]
    assert letters[0].key == b"a1"
    assert letters[0].value == b"{not json"
    assert headers[0]["cdcbox.error.type"] == b"UndecodablePayload"
    assert b"not valid JSON" in headers[0]["cdcbox.error.message"]
    assert headers[0]["cdcbox.original.topic"] == topic.encode()
    assert headers[0]["cdcbox.error.attempts"] == b"0"
    with psycopg.connect(stack.dsn) as conn:
        assert [r[0] for r in effects(conn, consumer)] == [other]


def test_failing_handler_is_retried_then_dead_lettered_and_its_aggregate_parked(
    stack: Endpoints, run_consumer: Any, recorder: Any
) -> None:
    aggregate_type, consumer = unique("order"), unique("c")
    ids = write(
        stack.dsn,
        [
            NewEvent(aggregate_type, "broken", "Created", {"n": 1}, aggregate_version=1),
            NewEvent(aggregate_type, "broken", "Created", {"n": 2}, aggregate_version=2),
            NewEvent(aggregate_type, "fine", "Created", {"n": 3}, aggregate_version=1),
        ],
    )
    handler = recorder(consumer, aggregate_type, {"Created"}, fail=lambda e: e.event_id == ids[0])
    with run_consumer([handler], group=consumer, retry=FAST_RETRY) as running:
        eventually(lambda: running.stats[Outcome.PARKED] == 1, what="the later event parked")
        assert running.stats[Outcome.DEAD_LETTERED] == 1
        assert running.stats.retries == FAST_RETRY.max_attempts - 1
    with psycopg.connect(stack.dsn) as conn:
        assert [r[1] for r in effects(conn, consumer)] == ["fine"]
        inbox = conn.execute(
            "SELECT event_id, status, retry_count, error_message FROM inbox_event "
            "WHERE consumer_name = %s AND status = 'FAILED' ORDER BY received_at",
            (consumer,),
        ).fetchall()
        assert [r[0] for r in inbox] == ids[:2]
        assert inbox[0][2] == FAST_RETRY.max_attempts
        assert "handler refuses" in inbox[0][3]
        parked = conn.execute(
            "SELECT aggregate_id, event_id FROM consumer_parked_aggregate WHERE consumer_name = %s",
            (consumer,),
        ).fetchall()
        assert parked == [("broken", ids[0])]
    letters = dead_letters(stack, wire.topic_for(aggregate_type) + ".dlq", expect=2)
    assert [dict(r.headers)["id"] for r in letters] == [str(i).encode() for i in ids[:2]]
    first, second = (dict(r.headers) for r in letters)
    assert first["cdcbox.error.type"] == b"RuntimeError"
    assert first["cdcbox.error.attempts"] == str(FAST_RETRY.max_attempts).encode()
    assert first["cdcbox.consumer"] == consumer.encode()
    assert b"parked" in second["cdcbox.error.message"]


def test_transient_failure_is_retried_and_applied_once(
    stack: Endpoints, run_consumer: Any, recorder: Any
) -> None:
    aggregate_type, consumer = unique("order"), unique("c")
    attempts: list[Any] = []

    def fail_twice(event: Event) -> bool:
        attempts.append(event.event_id)
        return len(attempts) <= 2

    (event_id,) = write(stack.dsn, [NewEvent(aggregate_type, "a", "Created", {"n": 1})])
    handler = recorder(consumer, aggregate_type, {"Created"}, fail=fail_twice)
    with run_consumer([handler], group=consumer, retry=FAST_RETRY) as running:
        eventually(lambda: running.stats[Outcome.PROCESSED] == 1, what="applied after retries")
        assert running.stats.retries == 2
        assert running.stats[Outcome.DEAD_LETTERED] == 0
    assert attempts == [event_id] * 3
    assert count_effects(stack.dsn, consumer) == 1


def test_batch_mode_applies_everything_but_the_failing_record_exactly_once(
    stack: Endpoints, run_consumer: Any, caplog: pytest.LogCaptureFixture, recorder: Any
) -> None:
    aggregate_type, consumer = unique("order"), unique("c")
    events = [
        NewEvent(aggregate_type, f"a{i % 10}", "Created", {"i": i}, aggregate_version=i // 10 + 1)
        for i in range(100)
    ]
    ids = write(stack.dsn, events)
    poisoned = ids[95]  # the last event of aggregate a5: nothing of a5 is behind it
    handler = recorder(consumer, aggregate_type, {"Created"}, fail=lambda e: e.event_id == poisoned)
    with run_consumer([handler], group=consumer, retry=FAST_RETRY, batch_mode=True) as running:
        eventually(lambda: running.stats[Outcome.DEAD_LETTERED] == 1, what="the poisoned one")
        eventually(lambda: running.stats[Outcome.PROCESSED] == 99, what="99 applied")
    with psycopg.connect(stack.dsn) as conn:
        applied = [r[0] for r in effects(conn, consumer)]
        statuses: dict[Any, Any] = dict(
            conn.execute(
                "SELECT status, count(*) FROM inbox_event WHERE consumer_name = %s GROUP BY status",
                (consumer,),
            ).fetchall()
        )
    assert sorted(applied) == sorted(i for i in ids if i != poisoned)
    assert len(applied) == len(set(applied)) == 99
    assert statuses == {"PROCESSED": 99, "FAILED": 1}
    # ... and it really was batch mode: no batch fell back to one-by-one processing.
    assert "failed as a whole" not in caplog.text


def test_outage_across_aggregates_opens_the_breaker_instead_of_dead_lettering(
    stack: Endpoints, run_consumer: Any, recorder: Any
) -> None:
    aggregate_type, consumer = unique("order"), unique("c")
    write(stack.dsn, [NewEvent(aggregate_type, f"a{i}", "Created", {"i": i}) for i in range(3)])
    outage = {"on": True}
    handler = recorder(consumer, aggregate_type, {"Created"}, fail=lambda e: outage["on"])
    with run_consumer(
        [handler], group=consumer, breaker=BreakerPolicy(failing_aggregates=1), retry=FAST_RETRY
    ) as running:
        eventually(
            lambda: running.stats.retries >= 2 * FAST_RETRY.max_attempts,
            what="retries well past max_attempts while the circuit is open",
        )
        assert running.stats[Outcome.DEAD_LETTERED] == 0
        outage["on"] = False
        eventually(lambda: count_effects(stack.dsn, consumer) == 3, what="all applied after")
    assert running.stats[Outcome.DEAD_LETTERED] == 0


def test_a_stop_during_a_held_retry_exits_and_leaves_the_record_for_the_next_run(
    stack: Endpoints, run_consumer: Any, recorder: Any
) -> None:
    aggregate_type, consumer = unique("order"), unique("c")
    write(stack.dsn, [NewEvent(aggregate_type, "a", "Created", {})])
    outage = {"on": True}
    handler = recorder(consumer, aggregate_type, {"Created"}, fail=lambda e: outage["on"])
    hold_forever = {"breaker": BreakerPolicy(failing_aggregates=1), "retry": FAST_RETRY}
    port = free_port()
    with run_consumer([handler], group=consumer, metrics_port=port, **hold_forever) as running:
        eventually(
            lambda: running.consumer.stats.retries > FAST_RETRY.max_attempts,
            what="the record held by the open breaker",
        )
        assert readyz(port) == (503, "circuit breaker open: records held back")
    # run_consumer asserted the thread stopped (within 30 s) without an error.
    assert running.stats[Outcome.DEAD_LETTERED] == 0
    outage["on"] = False
    with run_consumer([handler], group=consumer, **hold_forever):
        eventually(lambda: count_effects(stack.dsn, consumer) == 1, what="applied next time")


def test_metrics_endpoint_serves_counts_and_health(
    stack: Endpoints, run_consumer: Any, recorder: Any
) -> None:
    port = free_port()
    aggregate_type, consumer = unique("order"), unique("c")
    write(stack.dsn, [NewEvent(aggregate_type, "a", "Created", {"n": i}) for i in range(3)])
    handler = recorder(consumer, aggregate_type, {"Created"})
    with run_consumer([handler], group=consumer, metrics_port=port) as running:
        eventually(lambda: running.stats[Outcome.PROCESSED] == 3, what="3 processed")
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as r:
            assert r.status == 200
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=5) as r:
            assert (r.status, r.read()) == (200, b"ready\n")
        text = scrape(port)
        # Every part of the poll cycle that applied them, once it ended (offsets last).
        eventually(lambda: cycle_parts_observed(port), what="each part of the poll cycle")
    line = f'cdcbox_consumer_records_total{{consumer="{consumer}",outcome="processed"}} 3.0'
    assert line in text
    assert f'cdcbox_consumer_handler_duration_seconds_count{{consumer="{consumer}"}} 3.0' in text


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
        return str(r.read().decode())


def cycle_parts_observed(port: int) -> bool:
    text = scrape(port)
    return all(
        re.search(rf'poll_cycle_duration_seconds_count{{part="{part}"}} [1-9]', text)
        for part in ("poll", "apply", "durable", "offsets")
    )


def test_a_member_reloads_the_parked_set_when_partitions_are_assigned(
    stack: Endpoints, run_consumer: Any, recorder: Any
) -> None:
    aggregate_type, consumer = unique("order"), unique("c")
    handler = recorder(consumer, aggregate_type, {"Created"})
    # A long refresh interval: only an assignment can make this member see a new park.
    slow_refresh = {"parked_refresh_s": 3600.0}
    with run_consumer([handler], group=consumer, **slow_refresh) as member:
        write(stack.dsn, [NewEvent(aggregate_type, "warm-up", "Created", {}, aggregate_version=1)])
        eventually(lambda: count_effects(stack.dsn, consumer) == 1, what="the warm-up event")
        # Another member parks "held" (it dead-lettered v1 a moment ago) ...
        with psycopg.connect(stack.dsn) as conn:
            conn.execute(
                "INSERT INTO consumer_parked_aggregate (consumer_name, aggregate_type, "
                "aggregate_id, event_id, reason) VALUES (%s, %s, 'held', gen_random_uuid(), "
                "'parked by the previous owner')",
                (consumer, aggregate_type),
            )
        # ... then joins and leaves the group: this member's partitions are reassigned.
        with run_consumer([handler], group=consumer, **slow_refresh) as other:
            eventually(other.consumer.assigned, what="the second member assigned")
        # The group hands the departed member's partitions back (at once when its leave
        # reaches the coordinator, after its session timeout when it does not).
        eventually(
            lambda: len(member.consumer.assignment()) == PARTITIONS,
            timeout=90,
            what="the first member owning every partition again",
        )
        write(stack.dsn, [NewEvent(aggregate_type, "held", "Created", {}, aggregate_version=2)])
        eventually(lambda: member.stats[Outcome.PARKED] == 1, what="v2 parked, not applied")
    with psycopg.connect(stack.dsn) as conn:
        assert [r[1] for r in effects(conn, consumer)] == ["warm-up"]
