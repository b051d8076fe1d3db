"""The fault ledger over the whole CDC pipeline (writers → PostgreSQL → Debezium in Kafka
Connect → Kafka → consumer processes → business table): each scenario breaks one
component mid-stream and requires lost = 0, effects exactly once, order held and no
rolled-back event delivered. The safeguard-off runs show the same faults do lose or
double events once the safeguard is gone."""

from __future__ import annotations

import functools
import json
import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner

from cdcbox import wire
from cdcbox.cli.main import cli
from cdcbox.connect.client import ConnectClient
from cdcbox.producer.outbox import NewEvent, Outbox
from cdcbox.stack.connect_worker import NativeConnect
from cdcbox.stack.endpoints import Endpoints
from cdcbox.stack.kafka import NativeKafka
from cdcbox.stack.mariadb import NativeMariaDB
from cdcbox.stack.postgres import NativePostgres
from tests.faults import ledger
from tests.faults.conftest import CONNECTOR, NativeParts, connector_running
from tests.faults.scenario import Scenario, assert_exact, assert_exact_on_the_topic
from tests.helpers import eventually

pytestmark = [pytest.mark.e2e, pytest.mark.faults, pytest.mark.timeout(420)]


def ctl(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def sigkill(component: NativePostgres | NativeKafka | NativeConnect | NativeMariaDB) -> None:
    record = component.pid_record()
    assert record is not None and record.alive(), f"{component.name} is not running"
    os.kill(record.pid, signal.SIGKILL)
    eventually(lambda: not record.alive(), timeout=30, what=f"{component.name} killed")


def killed_and_restarted(
    component: NativeKafka | NativeConnect, client: ConnectClient
) -> Callable[[Scenario], None]:
    """SIGKILL `component`, write 450 more transactions while it is down, restart it."""

    def fault(s: Scenario) -> None:
        sigkill(component)
        s.stream_on(450)
        component.start()
        connector_running(client)

    return fault


def test_kafka_connect_sigkilled_mid_stream(
    stack: Endpoints, parts: NativeParts, tmp_path: Path
) -> None:
    scenario = Scenario("connect SIGKILL", stack, tmp_path)
    result = scenario.run(killed_and_restarted(parts.connect, parts.client))
    assert_exact_on_the_topic(result, scenario)


def test_the_broker_sigkilled_mid_stream(
    stack: Endpoints, parts: NativeParts, tmp_path: Path
) -> None:
    scenario = Scenario("broker SIGKILL", stack, tmp_path)
    result = scenario.run(killed_and_restarted(parts.kafka, parts.client))
    assert_exact_on_the_topic(result, scenario)


def test_postgresql_sigkilled_mid_stream(
    stack: Endpoints, parts: NativeParts, tmp_path: Path
) -> None:
    def fault(s: Scenario) -> None:
        sigkill(parts.postgres)
        parts.postgres.start()  # crash recovery; writers and consumers reconnect
        connector_running(parts.client)
        errors = s.writers.errors
        eventually(lambda: s.writers.attempted > errors + 50, timeout=60, what="writers back")

    scenario = Scenario("postgres SIGKILL", stack, tmp_path)
    result = scenario.run(fault)
    assert scenario.writers.errors > 0  # the writers really saw the database go
    assert_exact_on_the_topic(result, scenario)


def terminate(dsn: str, where: str) -> int:
    """pg_terminate_backend every session matching `where`; returns how many."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            f"WHERE pid <> pg_backend_pid() AND {where}"
        ).fetchall()
    return len(rows)


def terminated_some(dsn: str, where: str) -> bool:
    return terminate(dsn, where) >= 1


def walsender_and_consumer_sessions_terminated(s: Scenario, times: int = 3) -> None:
    """Terminate the walsender and the consumers' sessions `times` times, each time once
    Debezium and the consumers have reconnected on their own, 300 transactions apart."""
    for _ in range(times):
        for sessions in ("backend_type = 'walsender'", "application_name = 'cdcbox'"):
            eventually(
                functools.partial(terminated_some, s.stack.dsn, sessions),
                timeout=60,
                interval=0.5,
                what=f"a session where {sessions} to terminate",
            )
        s.stream_on(300)


def test_walsender_and_consumer_sessions_terminated_repeatedly(
    stack: Endpoints, parts: NativeParts, tmp_path: Path
) -> None:
    def fault(s: Scenario) -> None:
        walsender_and_consumer_sessions_terminated(s)
        assert len(s.group.running()) == s.consumers  # none died of it
        connector_running(parts.client)

    scenario = Scenario("walsender + sessions terminated x3", stack, tmp_path)
    assert_exact_on_the_topic(scenario.run(fault), scenario)


def kill_and_restart(times: int, sig: signal.Signals = signal.SIGKILL) -> object:
    def fault(s: Scenario) -> None:
        for _ in range(times):
            s.group.kill_one(sig)
            s.group.start(1)
            s.stream_on(300)

    return fault


@pytest.mark.parametrize("mode", ["per-record", "batch"])
def test_consumers_sigkilled_repeatedly(
    stack: Endpoints, parts: NativeParts, tmp_path: Path, mode: str
) -> None:
    flags = ("--batch",) if mode == "batch" else ()
    scenario = Scenario(f"consumers SIGKILL x3 ({mode})", stack, tmp_path, flags=flags)
    assert_exact(scenario.run(kill_and_restart(3)), scenario)  # type: ignore[arg-type]


def kill_between_db_and_offset_commit(s: Scenario) -> None:
    """Every process is replaced by one that SIGKILLs itself right after 60 records
    committed in the database, before their offsets are committed."""
    for proc in s.group.running():
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    for _ in range(2):
        s.group.start(1, kill_after_records=60)
        killed = s.group.procs[-1]
        assert killed.wait(timeout=90) == -signal.SIGKILL  # by the hook, after 60 records
    s.group.start(1)


def test_consumer_killed_between_the_database_commit_and_the_offset_commit(
    stack: Endpoints, parts: NativeParts, tmp_path: Path
) -> None:
    scenario = Scenario("consumer killed after db commit, before offset commit", stack, tmp_path)
    assert_exact(scenario.run(kill_between_db_and_offset_commit), scenario)


def test_a_consumer_stopped_past_its_session_timeout_and_resumed(
    stack: Endpoints, parts: NativeParts, tmp_path: Path
) -> None:
    def fault(s: Scenario) -> None:
        zombie = s.group.running()[0]
        zombie.send_signal(signal.SIGSTOP)
        s.stream_on(1350)  # ~9 s, past the 6 s session timeout: the group moves on
        zombie.send_signal(signal.SIGCONT)

    scenario = Scenario("consumer SIGSTOP past session timeout", stack, tmp_path)
    assert_exact(scenario.run(fault), scenario)


def test_without_inbox_dedupe_the_same_kill_applies_events_twice(
    stack: Endpoints, parts: NativeParts, tmp_path: Path
) -> None:
    # Unversioned events: the version guard would otherwise drop the redelivered copies,
    # and the inbox must be the only safeguard in play.
    scenario = Scenario(
        "consumer killed after db commit, before offset commit",
        stack,
        tmp_path,
        versioned=False,
        fault_switches="no-inbox-dedupe",
        safeguard_off="inbox dedupe",
    )
    result = scenario.run(kill_between_db_and_offset_commit)
    assert result.double_effects > 0, result
    assert result.lost == 0


def test_with_offsets_committed_first_the_same_kill_loses_events(
    stack: Endpoints, parts: NativeParts, tmp_path: Path
) -> None:
    scenario = Scenario(
        "consumer killed after db commit, before offset commit",
        stack,
        tmp_path,
        fault_switches="offsets-before-db-commit",
        safeguard_off="offset after db commit",
        settle_timeout_s=30,
    )
    result = scenario.run(kill_between_db_and_offset_commit)
    assert result.lost > 0, result


BIG_TRANSACTION = 20_000


def killed_inside_a_big_transaction(
    stack: Endpoints,
    parts: NativeParts,
    component: NativeKafka | NativeConnect,
    published_when_killed: list[int],
) -> Callable[[Scenario], None]:
    """Append one transaction of `BIG_TRANSACTION` rows; once more than 500 of its
    events are on the topic, SIGKILL `component` and restart it (how many were out is
    appended to `published_when_killed`)."""

    def fault(s: Scenario) -> None:
        topic = wire.topic_for(s.aggregate_type)
        before = ledger.topic_size(stack.bootstrap_servers, topic)
        with psycopg.connect(stack.dsn) as conn, conn.transaction():
            Outbox().append_many(
                conn,
                [
                    NewEvent(
                        s.aggregate_type,
                        f"big-{i % 100}",
                        "Changed",
                        {"n": i // 100 + 1},
                        aggregate_version=i // 100 + 1,
                    )
                    for i in range(BIG_TRANSACTION)
                ],
            )

        def published() -> int:
            return ledger.topic_size(stack.bootstrap_servers, topic) - before

        eventually(
            lambda: published() > 500,
            timeout=60,
            interval=0.05,
            what="the big transaction under way",
        )
        published_when_killed.append(published())
        sigkill(component)
        component.start()
        connector_running(parts.client)

    return fault


@pytest.mark.parametrize(
    ("victim", "name"),
    [
        ("connect", "connect SIGKILL inside a 20,000-row transaction"),
        ("kafka", "broker SIGKILL inside a 20,000-row transaction"),
    ],
)
def test_sigkilled_while_a_20000_row_transaction_is_streamed(
    stack: Endpoints, parts: NativeParts, tmp_path: Path, victim: str, name: str
) -> None:
    """Killed while Connect commits the big transaction's records poll by poll (a Kafka
    transaction per poll of up to 4,096 records). Connect: it restarts from its last
    committed offset, inside the PostgreSQL transaction, and the records after that
    offset were never committed on the topic (its Kafka transaction died with it). The
    broker (the transaction coordinator): the open transaction is aborted, the task
    resumes from the offset committed with the last committed one. Either way no copy
    for a read_committed reader, and no loss."""
    component: NativeKafka | NativeConnect = getattr(parts, victim)
    published_when_killed: list[int] = []
    fault = killed_inside_a_big_transaction(stack, parts, component, published_when_killed)
    scenario = Scenario(name, stack, tmp_path)
    result = scenario.run(fault)
    assert published_when_killed[0] < BIG_TRANSACTION  # the kill landed while publishing
    assert_exact_on_the_topic(result, scenario)


def wal_position(dsn: str) -> str:
    with psycopg.connect(dsn) as conn:
        row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
    assert row is not None
    return str(row[0])


def held_since(dsn: str, position: str, slot: str = "cdcbox_outbox") -> tuple[int, int]:
    """WAL written since `position`, and how far before `position` the slot's restart
    point is (>= 0: the slot still holds everything written since then)."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), %s::pg_lsn)::bigint, "
            "pg_wal_lsn_diff(%s::pg_lsn, restart_lsn)::bigint "
            "FROM pg_replication_slots WHERE slot_name = %s",
            (position, position, slot),
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


@pytest.mark.timeout(600)
def test_connector_paused_then_stopped_with_writes_going_on(
    stack: Endpoints, parts: NativeParts, tmp_path: Path
) -> None:
    """Half a minute paused, half a minute stopped: the slot keeps every event written
    meanwhile (its retained WAL covers all of it, as `cdc-ctl slot status` shows), and
    all of them arrive after. The outage counts from the moment Connect reports the
    connector PAUSED / STOPPED: until then its task may still confirm what it read."""
    held: list[tuple[int, int, int]] = []  # (written, slot's margin, retained per slot status)

    def fault(s: Scenario) -> None:
        for hold, state in ((parts.client.pause, "PAUSED"), (parts.client.stop, "STOPPED")):
            hold(CONNECTOR)
            parts.client.wait_until(CONNECTOR, state, timeout_s=60)
            position = wal_position(stack.dsn)
            s.stream_on(4500)  # the outage: ~30 s of writers going on
            status = json.loads(ctl("slot", "status", "--json").output)
            (row,) = [r for r in status if r["name"] == "cdcbox_outbox"]
            written, margin = held_since(stack.dsn, position)
            held.append((written, margin, row["retained_bytes"]))
            parts.client.resume(CONNECTOR)
            connector_running(parts.client)

    scenario = Scenario("connector paused 30 s, then stopped 30 s", stack, tmp_path)
    result = scenario.run(fault)
    for written, margin, retained in held:
        assert written > 0 and margin >= 0, held  # nothing written in the outage released
        assert retained >= written, held
    assert_exact(result, scenario)
