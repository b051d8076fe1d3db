"""The polling relay through a broker that stops answering and a PostgreSQL restart: it
backs off, recovers on its own, and every row ends SENT and published in order."""

from __future__ import annotations

import os
import signal
import threading
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
import pytest
from psycopg import sql

from cdcbox import wire
from cdcbox.connect.client import ConnectClient
from cdcbox.names import DbNames
from cdcbox.producer.outbox import NewEvent, Outbox
from cdcbox.relay import RelayConfig, RelayWorker
from cdcbox.relay.config import RelayBackoff
from cdcbox.stack.config import StackConfig
from cdcbox.stack.endpoints import Endpoints
from cdcbox.stack.kafka import NativeKafka
from cdcbox.stack.postgres import NativePostgres
from cdcbox.stack.secrets import StackSecrets
from tests.e2e.topics import read_topic
from tests.faults.conftest import connector_stopped
from tests.helpers import eventually, migrated_schema, unique

pytestmark = [pytest.mark.e2e, pytest.mark.faults]


@pytest.fixture
def names(stack: Endpoints) -> DbNames:
    return migrated_schema(stack.dsn, DbNames(schema=unique("outage")))


@contextmanager
def relay_in_thread(stack: Endpoints, names: DbNames, **options: Any) -> Iterator[RelayWorker]:
    """`RelayWorker.run` (what `cdc-ctl relay run` runs) in a thread; it must still be
    running, not crashed, when the block ends, and stop cleanly after it."""
    config = RelayConfig(
        dsn=stack.dsn,
        bootstrap_servers=stack.bootstrap_servers,
        worker_id=unique("w"),
        poll_interval_s=0.2,
        backoff=RelayBackoff(cap_s=1.0),
        **options,
    )
    worker = RelayWorker(config, names=names)
    errors: list[BaseException] = []

    def target() -> None:
        try:
            worker.run()
        except BaseException as e:
            errors.append(e)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    try:
        yield worker
        assert thread.is_alive() and not errors, f"the relay stopped: {errors!r}"
    finally:
        worker.stop()
        thread.join(timeout=60)
    assert not errors, f"the relay crashed: {errors!r}"


def write(dsn: str, names: DbNames, aggregate_type: str, aggregates: int, versions: int) -> int:
    outbox = Outbox(names)
    with psycopg.connect(dsn) as conn, conn.transaction():
        outbox.append_many(
            conn,
            [
                NewEvent(aggregate_type, f"a{a}", "Changed", {"v": v}, aggregate_version=v)
                for v in range(1, versions + 1)
                for a in range(aggregates)
            ],
        )
    return aggregates * versions


def statuses(dsn: str, names: DbNames) -> dict[str, int]:
    with psycopg.connect(dsn) as conn:
        query = sql.SQL("SELECT status, count(*) FROM {} GROUP BY 1").format(names.table("outbox"))
        return dict(conn.execute(query).fetchall())


def assert_published_in_order(stack: Endpoints, aggregate_type: str, total: int) -> None:
    """Every event on the topic; per aggregate, each version first seen after the last."""
    records = read_topic(stack, wire.topic_for(aggregate_type), expect=total, settle_ms=1000)
    first_seen: dict[str, list[int]] = defaultdict(list)
    seen: set[bytes] = set()
    for r in records:
        headers = dict(r.headers)
        if headers["id"] not in seen:
            seen.add(headers["id"])
            first_seen[r.key.decode()].append(int(headers["aggregate_version"]))
    assert len(seen) == total
    for aggregate, versions in first_seen.items():
        assert versions == sorted(versions), f"{aggregate} published out of order"


def test_a_broker_that_stops_answering_past_the_flush_timeout_is_waited_out(
    stack: Endpoints, names: DbNames, native_stack: StackConfig
) -> None:
    kafka = NativeKafka(native_stack, None).pid_record()
    assert kafka is not None and kafka.alive(), "the native broker is not running"
    aggregate_type = unique("order")
    total = write(stack.dsn, names, aggregate_type, aggregates=5, versions=10)
    with connector_stopped(ConnectClient(stack.connect_url)):
        freeze_and_wait_out(kafka.pid, stack, names, total)
    assert_published_in_order(stack, aggregate_type, total)


def freeze_and_wait_out(kafka_pid: int, stack: Endpoints, names: DbNames, total: int) -> None:
    os.kill(kafka_pid, signal.SIGSTOP)
    try:
        with relay_in_thread(stack, names, send_timeout_s=2.0, bootstrap_timeout_ms=2000):
            # The flush timed out: the batch went to RETRY (the broker is frozen).
            eventually(
                lambda: statuses(stack.dsn, names).get("RETRY", 0) > 0,
                timeout=60,
                what="the batch backed off after the flush timeout",
            )
            os.kill(kafka_pid, signal.SIGCONT)
            eventually(
                lambda: statuses(stack.dsn, names) == {"SENT": total},
                timeout=120,
                what=f"{total} rows SENT after the broker came back",
            )
    finally:
        os.kill(kafka_pid, signal.SIGCONT)


def test_a_postgresql_restart_while_rows_are_pending_is_recovered_from(
    stack: Endpoints, names: DbNames, native_stack: StackConfig
) -> None:
    postgres = NativePostgres(native_stack, StackSecrets(native_stack.state_dir / "secrets"))
    aggregate_type = unique("order")
    total = write(stack.dsn, names, aggregate_type, aggregates=20, versions=100)
    with relay_in_thread(stack, names, batch_size=20, lease_s=2.0) as relay:
        eventually(lambda: relay.stats.sent > 0, timeout=60, what="the relay under way")
        assert statuses(stack.dsn, names).get("SENT", 0) < total  # rows are pending ...
        postgres.stop()  # ... when the database goes away
        postgres.start()
        eventually(
            lambda: statuses(stack.dsn, names) == {"SENT": total},
            timeout=180,
            what=f"{total} rows SENT after the restart",
        )
    assert_published_in_order(stack, aggregate_type, total)
