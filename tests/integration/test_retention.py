"""Inbox retention against real PostgreSQL: what the purge deletes, and how it finds it."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql

from cdcbox.names import DbNames
from cdcbox.ops.pacing import Pace
from cdcbox.ops.retention import InboxFloor, purge_inbox
from cdcbox.postgres.inbox import Inbox
from tests.helpers import FakeTime, migrated_schema, old_inbox_rows, unique

pytestmark = pytest.mark.integration
NO_FLOOR = InboxFloor(timedelta(0), timedelta(0), timedelta(0))


def _row(db: psycopg.Connection[Any], consumer: str, received: str, processed: str | None) -> Any:
    event_id = uuid.uuid4()
    db.execute(
        "INSERT INTO inbox_event (event_id, consumer_name, event_type, status, received_at, "
        "processed_at) VALUES (%s, %s, 'Created', 'PROCESSED', now() - %s::interval, "
        "now() - %s::interval)",
        (event_id, consumer, received, processed),
    )
    return event_id


def test_the_purge_counts_from_the_last_touch_so_a_late_replay_is_kept(
    db: psycopg.Connection[Any],
) -> None:
    consumer = unique("c")
    old = _row(db, consumer, "40 days", "39 days")
    replayed = _row(db, consumer, "40 days", "1 day")  # FAILED for weeks, replayed yesterday
    assert purge_inbox(db, timedelta(days=10), NO_FLOOR) >= 1
    left = {
        r[0]
        for r in db.execute(
            "SELECT event_id FROM inbox_event WHERE consumer_name = %s", (consumer,)
        )
    }
    assert left == {replayed}
    assert old not in left


def test_the_purge_batch_can_read_the_partial_index_instead_of_the_table(
    db: psycopg.Connection[Any],
) -> None:
    db.execute("SET enable_seqscan = off")  # a small table: ask which plan is possible
    plan = "\n".join(
        r[0]
        for r in db.execute(
            "EXPLAIN SELECT event_id, consumer_name FROM inbox_event "
            "WHERE coalesce(processed_at, received_at) < now() - interval '10 days' "
            "AND status IN ('PROCESSED', 'SKIPPED') LIMIT 5000"
        )
    )
    db.execute("RESET enable_seqscan")
    assert "Scan using inbox_event_purge_idx" in plan or "Scan on inbox_event_purge_idx" in plan


def test_the_purge_reports_progress_against_the_count_it_made_first(database: str) -> None:
    names = migrated_schema(database, DbNames(schema=unique("purge")))
    old_inbox_rows(database, names, 7)
    with psycopg.connect(database, autocommit=True) as conn:
        calls: list[tuple[int, int]] = []
        deleted = purge_inbox(
            conn,
            timedelta(days=10),
            NO_FLOOR,
            inbox=Inbox(names),
            batch=3,
            progress=lambda done, total: calls.append((done, total)),
        )
    assert deleted == 7
    assert calls == [(3, 7), (6, 7), (7, 7)]  # a real total, not a placeholder length


def test_a_paced_purge_waits_between_batches_and_still_deletes_everything(
    database: str,
) -> None:
    names = migrated_schema(database, DbNames(schema=unique("paced")))
    time = FakeTime()
    old_inbox_rows(database, names, 7)
    with psycopg.connect(database, autocommit=True) as conn:
        deleted = purge_inbox(
            conn,
            timedelta(days=10),
            NO_FLOOR,
            inbox=Inbox(names),
            batch=3,
            pace=Pace(2, clock=time.clock, sleep=time.sleep),
        )
        left = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(names.table("inbox")))
        assert left.fetchone() == (0,)
    assert deleted == 7
    # 3 and then 6 rows at 2 per second; none after the last batch, nothing left to hold.
    assert time.waits == [1.5, 1.5]
