"""The polling relay publishing a MariaDB service's outbox to the stack's Kafka: the
records are those Debezium makes of the same row on PostgreSQL, workers share the work
in order, and a worker SIGKILLed mid-batch loses nothing."""

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

from cdcbox import wire
from cdcbox.mariadb import MariaDbOutbox, connect
from cdcbox.names import DbNames
from cdcbox.producer.columns import EVENT_COLUMNS
from cdcbox.producer.outbox import NewEvent, Outbox
from cdcbox.relay import RelayConfig, RelayWorker
from cdcbox.stack.endpoints import Endpoints
from tests.e2e.topics import assert_each_aggregate_in_order, read_topic
from tests.helpers import eventually, mariadb_outbox, unique

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def names(mariadb_dsn: str) -> DbNames:
    return mariadb_outbox(mariadb_dsn)


def worker(stack: Endpoints, dsn: str, names: DbNames, **options: Any) -> RelayWorker:
    config = RelayConfig(
        dsn=dsn,
        bootstrap_servers=stack.bootstrap_servers,
        worker_id=unique("w"),
        poll_interval_s=0.2,
        **options,
    )
    return RelayWorker(config, names=names)


def statuses(dsn: str, names: DbNames) -> dict[str, int]:
    conn = connect(dsn, autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT status, count(*) FROM {names.outbox} GROUP BY status")
            return {s: int(n) for s, n in cur.fetchall()}
    finally:
        conn.close()


def test_relayed_from_mariadb_the_record_is_debeziums_for_the_same_row(
    stack: Endpoints, mariadb_dsn: str, names: DbNames
) -> None:
    aggregate_type = unique("order")
    event = NewEvent(
        aggregate_type,
        "o-1",
        "OrderCreated",
        {"order_id": "o-1", "n": [1, 2], "name": "Zoë"},
        aggregate_version=7,
        trace_id="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        causation_id="0192d6a4-7c3e-7000-8000-000000000001",
    )
    with psycopg.connect(stack.dsn) as conn:
        with conn.transaction():
            event_id = Outbox().append(conn, event)
        columns = [*EVENT_COLUMNS, "created_at", "occurred_at"]
        row = conn.execute(
            f"SELECT {', '.join(columns)} FROM outbox_event WHERE event_id = %s", (event_id,)
        ).fetchone()
    assert row is not None
    (debezium,) = read_topic(stack, wire.topic_for(aggregate_type), expect=1)
    # The same row in the MariaDB outbox, every column copied.
    maria = connect(mariadb_dsn)
    try:
        with maria.cursor() as cur:
            cur.execute(
                f"INSERT INTO {names.outbox} ({', '.join(columns)}) "
                f"VALUES ({', '.join(['%s'] * len(columns))})",
                [str(v) if k == "event_id" else v for k, v in zip(columns, row, strict=True)],
            )
        maria.commit()
    finally:
        maria.close()
    assert worker(stack, mariadb_dsn, names).run(until_idle=True).sent == 1
    relayed = read_topic(stack, wire.topic_for(aggregate_type), expect=2)[1]
    for field in ("topic", "partition", "key", "value", "headers", "timestamp"):
        assert getattr(relayed, field) == getattr(debezium, field), field
    assert statuses(mariadb_dsn, names) == {"SENT": 1}


def test_two_workers_publish_from_concurrent_writers_in_order(
    stack: Endpoints, mariadb_dsn: str, names: DbNames
) -> None:
    aggregate_type = unique("order")
    outbox = MariaDbOutbox(names)
    writers, per_writer, versions = 3, 5, 60  # 900 events

    def write(w: int) -> None:
        conn = connect(mariadb_dsn)
        try:
            for v in range(1, versions + 1):
                events = [
                    NewEvent(aggregate_type, f"w{w}a{a}", "Changed", {"v": v}, aggregate_version=v)
                    for a in range(per_writer)
                ]
                outbox.append_many(conn, events)
                conn.commit()
        finally:
            conn.close()

    relays = [worker(stack, mariadb_dsn, names, batch_size=50) for _ in range(2)]
    threads = [threading.Thread(target=r.run) for r in relays]
    writer_threads = [threading.Thread(target=write, args=(w,)) for w in range(writers)]
    for t in [*threads, *writer_threads]:
        t.start()
    for t in writer_threads:
        t.join()
    total = writers * per_writer * versions
    try:
        eventually(
            lambda: statuses(mariadb_dsn, names).get("SENT") == total,
            timeout=120,
            what=f"{total} rows SENT",
        )
    finally:
        for r in relays:
            r.stop()
        for t in threads:
            t.join(timeout=60)
    assert sum(r.stats.sent for r in relays) == total
    # Which worker sends what is timing: polling (no NOTIFY), one may drain it all under
    # load (CI of fa2d3da). That they never block each other is proven deterministically
    # by tests/integration/test_mariadb_relay_store.py (a held claim is skipped).
    assert_each_aggregate_in_order(stack, aggregate_type, total, writers * per_writer, versions)


def test_a_worker_sigkilled_mid_batch_loses_nothing(
    stack: Endpoints, mariadb_dsn: str, tmp_path: Path
) -> None:
    # `relay run` publishes the default outbox table of the DSN's database: a database
    # of the stack's of its own (the fleet's `search`), emptied first.
    dsn = mariadb_dsn.replace("/cdcbox?", "/search?", 1)
    names = mariadb_outbox(dsn, DbNames())
    aggregate_type = unique("order")
    conn = connect(dsn)
    try:
        with conn.cursor() as cur:
            cur.execute(f"DELETE FROM {names.outbox}")
        ids = MariaDbOutbox(names).append_many(
            conn, [NewEvent(aggregate_type, f"a{i % 50}", "Changed", {"i": i}) for i in range(3000)]
        )
        conn.commit()
    finally:
        conn.close()
    env = {**os.environ, **stack.as_env(), "CDCBOX_DSN": dsn}
    with (tmp_path / "relay.log").open("ab") as log:
        victim = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "cdcbox.cli.main",
                "relay",
                "run",
                "--batch-size",
                "1000",
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
            lambda: statuses(dsn, names).get("PROCESSING", 0) > 0,
            timeout=60,
            interval=0.005,
            what=f"a batch in flight (log: {(tmp_path / 'relay.log').read_text()[-500:]})",
        )
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=30)
    finally:
        if victim.poll() is None:
            victim.kill()
            victim.wait(timeout=30)
    assert statuses(dsn, names).get("PROCESSING", 0) > 0  # leased to a dead worker
    heir = worker(stack, dsn, names, batch_size=1000)
    eventually(
        lambda: heir.run_once() == 0 and statuses(dsn, names) == {"SENT": 3000},
        timeout=60,
        what="the heir to re-claim the expired lease and send everything",
    )
    heir.close()
    records = read_topic(stack, wire.topic_for(aggregate_type), expect=3000)
    assert {dict(r.headers)["id"] for r in records} == {str(i).encode() for i in ids}
