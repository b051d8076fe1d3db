"""Consumer processes killed or stopped mid-stream: effects stay exactly once and ordered."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from cdcbox.producer.outbox import NewEvent, Outbox
from cdcbox.stack.endpoints import Endpoints
from tests.e2e.conftest import EFFECTS_DDL, count_effects
from tests.helpers import eventually, unique

pytestmark = [pytest.mark.e2e, pytest.mark.faults]
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def processes() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Consumer processes started by a test; any still running are killed by pid."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)


def start_consumer(
    stack: Endpoints,
    log: Path,
    consumer: str,
    aggregate_type: str,
    *flags: str,
    delay_s: float = 0.0,
    outage_file: Path | None = None,
) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        **stack.as_env(),
        "FAULT_CONSUMER": consumer,
        "FAULT_AGGREGATE_TYPE": aggregate_type,
        "FAULT_HANDLER_DELAY_S": str(delay_s),
        "FAULT_OUTAGE_FILE": str(outage_file or ""),
    }
    with log.open("ab") as out:  # the child keeps its own copy of the descriptor
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "cdcbox.cli.main",
                "consume",
                "tests.faults.handlers:EffectHandler",
                "--group",
                consumer,
                *flags,
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=out,
        )


def write_events(dsn: str, aggregate_type: str, aggregates: int, versions: int) -> int:
    outbox = Outbox()
    with psycopg.connect(dsn) as conn:
        for version in range(1, versions + 1):
            with conn.transaction():
                outbox.append_many(
                    conn,
                    [
                        NewEvent(
                            aggregate_type,
                            f"a{a}",
                            "Changed",
                            {"v": version},
                            aggregate_version=version,
                        )
                        for a in range(aggregates)
                    ],
                )
    return aggregates * versions


def effect_rows(dsn: str, consumer: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute(
            "SELECT event_id, aggregate_id, version FROM e2e_effect "
            "WHERE consumer_name = %s ORDER BY seq",
            (consumer,),
        ).fetchall()


@pytest.fixture(autouse=True)
def effects_table(stack: Endpoints) -> None:
    with psycopg.connect(stack.dsn) as conn:
        conn.execute(EFFECTS_DDL)


def test_sigterm_mid_batch_finishes_commits_and_loses_nothing(
    stack: Endpoints, processes: list[subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    aggregate_type, consumer = unique("fault"), unique("c")
    total = write_events(stack.dsn, aggregate_type, aggregates=10, versions=30)
    log = tmp_path / "consumer.log"
    proc = start_consumer(
        stack, log, consumer, aggregate_type, "--max-poll-records", "20", delay_s=0.01
    )
    processes.append(proc)
    eventually(lambda: count_effects(stack.dsn, consumer) >= 20, timeout=90, what="first effects")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0, log.read_text()
    stopped_at = count_effects(stack.dsn, consumer)
    assert stopped_at < total  # it really stopped mid-stream

    rest = start_consumer(stack, log, consumer, aggregate_type)
    processes.append(rest)
    eventually(
        lambda: count_effects(stack.dsn, consumer) == total, timeout=120, what=f"{total} effects"
    )
    rest.send_signal(signal.SIGTERM)
    assert rest.wait(timeout=60) == 0
    rows = effect_rows(stack.dsn, consumer)
    assert len({r[0] for r in rows}) == len(rows) == total


@pytest.mark.timeout(600)
def test_three_processes_one_sigkilled_apply_5000_events_once_and_in_order(
    stack: Endpoints, processes: list[subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    aggregate_type, consumer = unique("fault"), unique("c")
    workers = [
        start_consumer(
            stack,
            tmp_path / f"consumer-{i}.log",
            consumer,
            aggregate_type,
            "--batch",
            "--max-poll-records",
            "100",
            delay_s=0.001,
        )
        for i in range(3)
    ]
    processes.extend(workers)
    total = write_events(stack.dsn, aggregate_type, aggregates=50, versions=100)
    eventually(
        lambda: count_effects(stack.dsn, consumer) >= total // 5,
        timeout=180,
        what="a fifth applied",
    )
    workers[0].send_signal(signal.SIGKILL)
    workers[0].wait(timeout=30)
    eventually(
        lambda: count_effects(stack.dsn, consumer) >= total,
        timeout=300,
        what=f"{total} effects after the kill",
    )
    for proc in workers[1:]:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    rows = effect_rows(stack.dsn, consumer)
    assert len(rows) == total, (tmp_path / "consumer-1.log").read_text()[-3000:]
    assert len({r[0] for r in rows}) == total  # no event applied twice
    per_aggregate: dict[str, list[int]] = defaultdict(list)
    for _, aggregate_id, version in rows:
        per_aggregate[aggregate_id].append(version)
    assert len(per_aggregate) == 50
    for aggregate_id, versions in per_aggregate.items():
        assert versions == list(range(1, 101)), f"{aggregate_id} out of order"


BREAKER_THRESHOLD = 5


def dead_lettered_aggregates(dsn: str, consumer: str) -> set[str]:
    """Aggregates with an event this consumer name dead-lettered, ever."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT DISTINCT aggregate_id FROM inbox_event WHERE consumer_name = %s "
            "AND failed_at IS NOT NULL",
            (consumer,),
        ).fetchall()
    return {r[0] for r in rows}


def breaker_open(dsn: str, consumer: str) -> bool:
    with psycopg.connect(dsn) as conn:
        row = conn.execute(
            "SELECT is_open FROM consumer_breaker WHERE consumer_name = %s", (consumer,)
        ).fetchone()
    return bool(row and row[0])


@pytest.mark.timeout(600)
def test_an_outage_across_three_processes_dead_letters_little_and_loses_nothing(
    stack: Endpoints, processes: list[subprocess.Popen[bytes]], tmp_path: Path
) -> None:
    """Every handler call fails for a while, in three processes of one consumer name: at
    most the threshold of aggregates is dead-lettered, and once the outage ends every
    event is applied once, in order, with no aggregate left parked."""
    aggregate_type, consumer = unique("outage"), unique("c")
    outage = tmp_path / "outage"
    outage.touch()
    flags = [
        "--max-attempts", "2", "--initial-delay", "0.01", "--max-delay", "1",
        "--breaker-aggregates", str(BREAKER_THRESHOLD), "--breaker-window", "60",
        "--max-poll-records", "20",
    ]  # fmt: skip
    workers = [
        start_consumer(
            stack, tmp_path / f"c{i}.log", consumer, aggregate_type, *flags, outage_file=outage
        )
        for i in range(3)
    ]
    processes.extend(workers)
    aggregates, versions = 30, 3
    total = write_events(stack.dsn, aggregate_type, aggregates, versions)
    eventually(lambda: breaker_open(stack.dsn, consumer), timeout=120, what="the breaker open")
    # The outage goes on while every process holds its record back.
    eventually(
        lambda: all("circuit open" in (tmp_path / f"c{i}.log").read_text() for i in range(3)),
        timeout=120,
        what="every process holding records back",
    )
    held = dead_lettered_aggregates(stack.dsn, consumer)
    outage.unlink()
    eventually(
        lambda: count_effects(stack.dsn, consumer) >= total, timeout=240, what=f"{total} effects"
    )
    for proc in workers:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    assert len(held) < BREAKER_THRESHOLD
    rows = effect_rows(stack.dsn, consumer)
    assert len(rows) == len({r[0] for r in rows}) == total
    per_aggregate: dict[str, list[int]] = defaultdict(list)
    for _, aggregate_id, version in rows:
        per_aggregate[aggregate_id].append(version)
    for aggregate_id, applied in per_aggregate.items():
        assert applied == list(range(1, versions + 1)), f"{aggregate_id} out of order"
    with psycopg.connect(stack.dsn) as conn:
        parked = conn.execute(
            "SELECT count(*) FROM consumer_parked_aggregate WHERE consumer_name = %s",
            (consumer,),
        ).fetchone()
    assert parked == (0,)
