"""The polling relay against real PostgreSQL and Kafka, on an outbox of its own schema
(the Debezium connector only watches public.outbox_event)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from cdcbox import wire
from cdcbox.limits import EventLimits
from cdcbox.migrate import migrate
from cdcbox.names import DbNames
from cdcbox.producer.outbox import NewEvent, Outbox
from cdcbox.relay import RelayConfig, RelayWorker
from cdcbox.stack.endpoints import Endpoints
from tests.e2e.topics import assert_each_aggregate_in_order, read_topic
from tests.helpers import eventually, migrated_schema, unique

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def names(stack: Endpoints) -> DbNames:
    return migrated_schema(stack.dsn, DbNames(schema=unique("relay")))


def worker(stack: Endpoints, names: DbNames, **options: Any) -> RelayWorker:
    config = RelayConfig(
        dsn=stack.dsn,
        bootstrap_servers=stack.bootstrap_servers,
        worker_id=unique("w"),
        poll_interval_s=0.2,
        **options,
    )
    return RelayWorker(config, names=names)


def statuses(dsn: str, names: DbNames) -> dict[str, int]:
    with psycopg.connect(dsn) as conn:
        return dict(
            conn.execute(
                sql.SQL("SELECT status, count(*) FROM {} GROUP BY status").format(
                    names.table("outbox")
                )
            ).fetchall()
        )


def make_due(dsn: str, names: DbNames) -> None:
    """Let time pass for RETRY rows: their next attempt is due now."""
    with psycopg.connect(dsn) as conn:
        conn.execute(
            sql.SQL("UPDATE {} SET next_retry_at = now() WHERE status = 'RETRY'").format(
                names.table("outbox")
            )
        )


def test_relay_and_debezium_records_for_the_same_row_are_identical(
    stack: Endpoints, names: DbNames
) -> None:
    aggregate_type = unique("order")
    with psycopg.connect(stack.dsn) as conn:
        with conn.transaction():
            event_id = Outbox().append(
                conn,
                NewEvent(
                    aggregate_type,
                    "o-1",
                    "OrderCreated",
                    {"order_id": "o-1", "n": [1, 2]},
                    aggregate_version=7,
                    trace_id="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
                    causation_id="0192d6a4-7c3e-7000-8000-000000000001",
                ),
            )
        (debezium,) = read_topic(stack, wire.topic_for(aggregate_type), expect=1)
        # The same row in the relay's outbox, every column copied.
        conn.execute(
            sql.SQL("INSERT INTO {} SELECT * FROM outbox_event WHERE event_id = %s").format(
                names.table("outbox")
            ),
            (event_id,),
        )
        conn.commit()
    assert worker(stack, names, listen=False).run(until_idle=True).sent == 1
    records = read_topic(stack, wire.topic_for(aggregate_type), expect=2)
    relayed = records[1]
    for field in ("topic", "partition", "key", "value", "headers", "timestamp"):
        assert getattr(relayed, field) == getattr(debezium, field), field
    assert dict(relayed.headers)["id"] == str(event_id).encode()
    assert dict(relayed.headers)["causation_id"] == b"0192d6a4-7c3e-7000-8000-000000000001"


def test_three_workers_publish_10000_events_from_concurrent_writers_in_order(
    stack: Endpoints, names: DbNames
) -> None:
    aggregate_type = unique("order")
    outbox = Outbox(names)
    # 4 writers x 10 aggregates each x 250 versions = 10,000 events
    writers, aggregates, versions = 4, 40, 250
    per_writer = aggregates // writers

    def write(w: int) -> None:
        with psycopg.connect(stack.dsn) as conn:
            for v in range(1, versions + 1):
                with conn.transaction():
                    outbox.append_many(
                        conn,
                        [
                            NewEvent(
                                aggregate_type,
                                f"w{w}a{a}",
                                "Changed",
                                {"v": v},
                                aggregate_version=v,
                            )
                            for a in range(per_writer)
                        ],
                    )

    relays = [worker(stack, names, batch_size=500) for _ in range(3)]
    threads = [threading.Thread(target=r.run) for r in relays]
    for t in threads:
        t.start()
    writer_threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for t in writer_threads:
        t.start()
    for t in writer_threads:
        t.join()
    total = writers * per_writer * versions
    try:
        eventually(
            lambda: statuses(stack.dsn, names).get("SENT") == total,
            timeout=180,
            what=f"{total} rows SENT",
        )
    finally:
        for r in relays:
            r.stop()
        for t in threads:
            t.join(timeout=60)
    assert sum(r.stats.sent for r in relays) == total
    assert all(r.stats.sent > 0 for r in relays)  # the work really was shared
    assert_each_aggregate_in_order(stack, aggregate_type, total, aggregates, versions)


def test_sigkilled_worker_leaves_its_lease_to_expire_and_nothing_is_lost(
    stack: Endpoints, names: DbNames, tmp_path: Path
) -> None:
    aggregate_type = unique("order")
    with psycopg.connect(stack.dsn) as conn, conn.transaction():
        ids = Outbox(names).append_many(
            conn, [NewEvent(aggregate_type, f"a{i % 50}", "Changed", {"i": i}) for i in range(4000)]
        )
    env = {**os.environ, **stack.as_env()}
    with (tmp_path / "relay.log").open("ab") as log:
        victim = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "cdcbox.cli.main",
                "--schema",
                names.schema,
                "relay",
                "run",
                "--batch-size",
                "2000",
                "--lease",
                "3",
                "--worker-id",
                "victim",
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )
    try:
        eventually(
            lambda: statuses(stack.dsn, names).get("PROCESSING", 0) > 0,
            timeout=60,
            interval=0.005,
            what="a batch in flight",
        )
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=30)
    finally:
        if victim.poll() is None:
            victim.kill()
            victim.wait(timeout=30)
    orphaned = statuses(stack.dsn, names).get("PROCESSING", 0)
    assert orphaned > 0  # killed mid-batch: rows leased to a dead worker
    heir = worker(stack, names, batch_size=1000, listen=False)
    eventually(
        lambda: heir.run_once() == 0 and statuses(stack.dsn, names) == {"SENT": 4000},
        timeout=60,
        what="the heir to re-claim the expired lease and send everything",
    )
    heir.close()
    with psycopg.connect(stack.dsn) as conn:
        by_heir = conn.execute(
            sql.SQL("SELECT count(*) FROM {} WHERE sent_at IS NOT NULL").format(
                names.table("outbox")
            )
        ).fetchone()
    assert by_heir == (4000,)
    records = read_topic(stack, wire.topic_for(aggregate_type), expect=4000)
    assert {dict(r.headers)["id"] for r in records} == {str(i).encode() for i in ids}
    assert len(records) >= 4000  # duplicates allowed (the inbox absorbs them)


def test_kafka_unavailable_backs_off_then_drains(stack: Endpoints, names: DbNames) -> None:
    aggregate_type = unique("order")
    with psycopg.connect(stack.dsn) as conn, conn.transaction():
        Outbox(names).append_many(
            conn, [NewEvent(aggregate_type, f"a{i}", "Changed", {"i": i}) for i in range(20)]
        )
    # A broker address where nothing listens: Kafka is down for this worker.
    down = RelayWorker(
        RelayConfig(
            dsn=stack.dsn,
            bootstrap_servers="127.0.0.1:1",
            worker_id="no-kafka",
            bootstrap_timeout_ms=1000,
            listen=False,
        ),
        names=names,
    )
    delays = []
    for attempt in range(1, 4):
        assert down.run_once() == 20
        with psycopg.connect(stack.dsn) as conn:
            row = conn.execute(
                sql.SQL(
                    "SELECT min(retry_count), max(retry_count), "
                    "extract(epoch FROM min(next_retry_at) - now()), bool_and(status = 'RETRY'), "
                    "min(last_error) FROM {}"
                ).format(names.table("outbox"))
            ).fetchone()
        assert row is not None
        assert row[0] == row[1] == attempt
        assert row[3] is True
        assert "unreachable" in row[4]
        delays.append(float(row[2]))
        make_due(stack.dsn, names)
    down.close()
    assert delays[0] < delays[1] < delays[2]  # 2 s, 4 s, 8 s (±20 %)
    up = worker(stack, names, listen=False)
    assert up.run(until_idle=True).sent == 20
    assert statuses(stack.dsn, names) == {"SENT": 20}
    assert len(read_topic(stack, wire.topic_for(aggregate_type), expect=20)) == 20


def test_an_oversized_row_goes_dead_at_once_and_its_aggregate_next_row_is_not_sent(
    stack: Endpoints, names: DbNames
) -> None:
    aggregate_type = unique("order")
    # The outbox's limit was raised after the relay's producer was sized: the row is
    # accepted at write, and Kafka refuses it.
    raised = EventLimits(3_000_000)
    with psycopg.connect(stack.dsn) as conn:
        migrate(conn, names=names, mode="polling", limits=raised)
    outbox = Outbox(names, limits=raised)
    with psycopg.connect(stack.dsn) as conn, conn.transaction():
        too_big = outbox.append(
            conn,
            NewEvent(
                aggregate_type,
                "stuck",
                "Changed",
                b'"' + b"x" * 2_000_000 + b'"',  # a JSON string over Kafka's limit
                content_type="application/json",
            ),
        )
        behind = outbox.append(conn, NewEvent(aggregate_type, "stuck", "Changed", {"n": 2}))
        others = outbox.append_many(
            conn, [NewEvent(aggregate_type, f"ok{i}", "Changed", {"i": i}) for i in range(5)]
        )
    relay = worker(stack, names, listen=False, max_attempts=3)
    relay.run_once()
    make_due(stack.dsn, names)
    relay.run_once()  # nothing of "stuck" is due again: DEAD blocks, PENDING waits behind
    relay.close()
    with psycopg.connect(stack.dsn) as conn:
        rows = dict(
            (r[0], r[1:])
            for r in conn.execute(
                sql.SQL("SELECT event_id, status, retry_count, last_error FROM {}").format(
                    names.table("outbox")
                )
            )
        )
    assert rows[too_big][:2] == ("DEAD", 1)  # one attempt: no retry can make it fit
    assert "MessageSizeTooLarge" in rows[too_big][2]
    assert rows[behind] == ("PENDING", 0, None)  # held behind its dead predecessor
    assert all(rows[i][0] == "SENT" for i in others)
    assert relay.stats.dead == 1
    published = read_topic(stack, wire.topic_for(aggregate_type), expect=5, settle_ms=1500)
    assert sorted(dict(r.headers)["id"].decode() for r in published) == sorted(map(str, others))
