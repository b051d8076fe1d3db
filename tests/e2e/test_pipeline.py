"""The whole pipeline, for real: PostgreSQL outbox → Debezium on Connect → Kafka → consumer."""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections import defaultdict
from typing import Any

import psycopg
import pytest

from cdcbox import wire
from cdcbox.consumer import Outcome
from cdcbox.kafka.client import KafkaSettings
from cdcbox.ops import groups
from cdcbox.producer.outbox import NewEvent, Outbox
from cdcbox.stack.endpoints import Endpoints
from tests.e2e.conftest import count_effects, effects
from tests.e2e.topics import read_topic
from tests.helpers import eventually, unique

pytestmark = pytest.mark.e2e
OUTBOX = Outbox()
TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def test_committed_event_reaches_handler_once_with_every_header(
    stack: Endpoints, db: psycopg.Connection[Any], run_consumer: Any, recorder: Any
) -> None:
    aggregate_type, consumer = unique("order"), unique("c")
    with db.transaction():
        db.execute("CREATE TEMP TABLE IF NOT EXISTS business (id text)")
        db.execute("INSERT INTO business VALUES ('o-1')")
        event_id = OUTBOX.append(
            db,
            NewEvent(
                aggregate_type,
                "o-1",
                "OrderCreated",
                {"order_id": "o-1", "total": 12.5},
                aggregate_version=1,
                trace_id=TRACEPARENT,
            ),
        )

    handler = recorder(consumer, aggregate_type, {"OrderCreated"})
    with run_consumer([handler], group=consumer) as running:
        eventually(lambda: count_effects(stack.dsn, consumer) == 1, what="the event applied")
        rows = effects(db, consumer)
        assert len(rows) == 1
        got_id, aggregate_id, version, headers, payload = rows[0]
        assert (got_id, aggregate_id, version) == (event_id, "o-1", 1)
        assert payload == {"order_id": "o-1", "total": 12.5}
        assert headers["event_type"] == "OrderCreated"
        assert headers["aggregate_type"] == aggregate_type
        assert headers["trace_id"] == TRACEPARENT
        assert headers["content_type"] == wire.CONTENT_TYPE_JSON
        assert headers["topic"] == wire.topic_for(aggregate_type)
        assert headers["occurred_at"] is not None
        eventually(lambda: running.stats[Outcome.PROCESSED] == 1, what="processed count")

    # The raw record carries exactly the wire contract: key, value bytes and headers.
    records = read_topic(stack, wire.topic_for(aggregate_type), expect=1, settle_ms=1000)
    record = records[0]
    assert record.key == b"o-1"
    assert record.value == b'{"order_id":"o-1","total":12.5}'
    names = [name for name, _ in record.headers]
    assert names == [
        "id",
        "event_type",
        "aggregate_type",
        "aggregate_version",
        "occurred_at",
        "traceparent",
        "content-type",
        "causation_id",
    ]
    header = dict(record.headers)
    assert header["id"] == str(event_id).encode()
    assert header["aggregate_version"] == b"1"
    assert header["occurred_at"].endswith(b"Z")


def test_rolled_back_event_never_arrives(
    stack: Endpoints, db: psycopg.Connection[Any], run_consumer: Any, recorder: Any
) -> None:
    aggregate_type, consumer = unique("order"), unique("c")
    rolled_back = uuid.uuid4()
    with contextlib.suppress(RuntimeError), db.transaction():
        OUTBOX.append(db, NewEvent(aggregate_type, "a", "Created", {"n": 0}, event_id=rolled_back))
        raise RuntimeError("business logic failed after the append")
    assert db.execute(
        "SELECT count(*) FROM outbox_event WHERE event_id = %s", (rolled_back,)
    ).fetchone() == (0,)
    with db.transaction():
        committed = OUTBOX.append(db, NewEvent(aggregate_type, "a", "Created", {"n": 1}))

    handler = recorder(consumer, aggregate_type, {"Created"})
    with run_consumer([handler], group=consumer):
        eventually(lambda: count_effects(stack.dsn, consumer) >= 1, what="committed event")
    ids = [row[0] for row in effects(db, consumer)]
    assert ids == [committed]
    # Nor is it on the topic at all: only the committed record was published.
    records = read_topic(stack, wire.topic_for(aggregate_type), expect=1, settle_ms=1000)
    assert [dict(r.headers)["id"] for r in records] == [str(committed).encode()]


def test_redelivered_records_change_nothing_and_are_counted(
    stack: Endpoints, db: psycopg.Connection[Any], run_consumer: Any, recorder: Any
) -> None:
    aggregate_type, consumer = unique("order"), unique("c")
    with db.transaction():
        OUTBOX.append_many(
            db,
            [
                NewEvent(aggregate_type, f"a{i}", "Created", {"i": i}, aggregate_version=1)
                for i in range(5)
            ],
        )
    handler = recorder(consumer, aggregate_type, {"Created"})
    with run_consumer([handler], group=consumer) as first:
        eventually(lambda: count_effects(stack.dsn, consumer) == 5, what="5 effects")
        eventually(lambda: first.stats[Outcome.PROCESSED] == 5, what="5 processed")

    # Reset the (now idle) group to the earliest offsets, as an operator would.
    groups.reset(
        KafkaSettings(stack.bootstrap_servers), consumer, "earliest", wire.topic_for(aggregate_type)
    )
    with run_consumer([handler], group=consumer) as second:
        eventually(lambda: second.stats[Outcome.DUPLICATE] == 5, what="5 duplicates counted")
        assert second.stats[Outcome.PROCESSED] == 0
    assert count_effects(stack.dsn, consumer) == 5


def test_concurrent_writers_arrive_in_per_aggregate_version_order(
    stack: Endpoints, run_consumer: Any, recorder: Any
) -> None:
    aggregate_type, consumer = unique("order"), unique("c")
    writers, aggregates_per_writer, versions = 4, 5, 50  # 1,000 events over 20 aggregates

    def write(writer: int) -> None:
        with psycopg.connect(stack.dsn) as conn:
            for version in range(1, versions + 1):
                for a in range(aggregates_per_writer):
                    with conn.transaction():
                        OUTBOX.append(
                            conn,
                            NewEvent(
                                aggregate_type,
                                f"w{writer}-a{a}",
                                "Changed",
                                {"v": version},
                                aggregate_version=version,
                            ),
                        )

    threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for t in threads:
        t.start()
    handler = recorder(consumer, aggregate_type, {"Changed"})
    with run_consumer([handler], group=consumer) as running:
        for t in threads:
            t.join()
        total = writers * aggregates_per_writer * versions
        eventually(
            lambda: count_effects(stack.dsn, consumer) == total,
            timeout=120,
            what=f"{total} effects",
        )
        assert running.stats[Outcome.STALE] == 0
    with psycopg.connect(stack.dsn) as conn:
        order: dict[str, list[int]] = defaultdict(list)
        for _, aggregate_id, version, _, _ in effects(conn, consumer):
            order[aggregate_id].append(version)
    assert len(order) == writers * aggregates_per_writer
    for aggregate_id, seen in order.items():
        assert seen == list(range(1, versions + 1)), f"{aggregate_id} out of order: {seen}"
