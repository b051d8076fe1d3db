"""`cdc-ctl` on a MariaDB consumer's database: inbox stats, the inbox purge (by last
touch, never below the safety floor, FAILED rows kept), parked aggregates listed and
released: the same commands and guarantees as on PostgreSQL."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from click.testing import CliRunner, Result

from cdcbox.cli.main import cli
from cdcbox.mariadb.session import MariaDbSession
from cdcbox.names import DbNames
from tests.helpers import unique

pytestmark = pytest.mark.integration
INBOX, PARKED = DbNames().inbox, DbNames().parked  # the stack's migrated database


def ctl(dsn: str, *args: str) -> Result:
    return CliRunner().invoke(cli, ["--dsn", dsn, *args])


def inbox_row(mariadb: MariaDbSession, consumer: str, status: str, received_days: int,
              processed_days: int | None) -> str:  # fmt: skip
    event_id = str(uuid.uuid4())
    mariadb.execute(
        f"INSERT INTO {INBOX} (event_id, consumer_name, event_type, status, received_at, "
        "processed_at) VALUES (%s, %s, 'Created', %s, UTC_TIMESTAMP(6) - INTERVAL %s DAY, "
        "UTC_TIMESTAMP(6) - INTERVAL %s DAY)",
        (event_id, consumer, status, received_days, processed_days),
    )
    return event_id


def left(mariadb: MariaDbSession, consumer: str) -> set[Any]:
    rows = mariadb.execute(f"SELECT event_id FROM {INBOX} WHERE consumer_name = %s", (consumer,))
    return {r[0] for r in rows.fetchall()}


def test_the_purge_deletes_finished_rows_by_last_touch_and_keeps_the_failed(
    mariadb_dsn: str, mariadb: MariaDbSession
) -> None:
    consumer = unique("c")
    inbox_row(mariadb, consumer, "PROCESSED", 40, 39)
    inbox_row(mariadb, consumer, "SKIPPED", 40, 39)
    replayed = inbox_row(mariadb, consumer, "PROCESSED", 40, 1)  # replayed yesterday
    failed = inbox_row(mariadb, consumer, "FAILED", 40, None)
    stats = ctl(mariadb_dsn, "inbox", "stats", "--json")
    assert stats.exit_code == 0, stats.output
    mine = {r["status"]: r["rows"] for r in json.loads(stats.output) if r["consumer"] == consumer}
    assert mine == {"PROCESSED": 2, "SKIPPED": 1, "FAILED": 1}
    purge = ["inbox", "purge", "--older-than", "10d", "--topic-retention", "1d", "--yes"]
    result = ctl(mariadb_dsn, *purge)
    assert result.exit_code == 0, result.output
    assert left(mariadb, consumer) == {replayed, failed}


def test_the_purge_is_refused_below_the_safety_floor(
    mariadb_dsn: str, mariadb: MariaDbSession
) -> None:
    consumer = unique("c")
    kept = inbox_row(mariadb, consumer, "PROCESSED", 5, 5)
    result = ctl(mariadb_dsn, "inbox", "purge", "--older-than", "2d", "--topic-retention",
                 "7d", "--yes")  # fmt: skip
    assert result.exit_code == 2
    assert "shorter than the safety floor" in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert left(mariadb, consumer) == {kept}


def test_a_parked_aggregate_is_listed_and_released(
    mariadb_dsn: str, mariadb: MariaDbSession
) -> None:
    consumer, event_id = unique("c"), str(uuid.uuid4())
    mariadb.execute(
        f"INSERT INTO {PARKED} (consumer_name, aggregate_type, aggregate_id, event_id, reason) "
        "VALUES (%s, 'order', 'o-1', %s, 'boom')",
        (consumer, event_id),
    )
    listed = ctl(mariadb_dsn, "parked", "list", "--json")
    assert listed.exit_code == 0, listed.output
    mine = [r for r in json.loads(listed.output) if r["consumer"] == consumer]
    assert [(r["aggregate_type"], r["aggregate_id"], r["event_id"]) for r in mine] == [
        ("order", "o-1", event_id)
    ]
    released = ctl(mariadb_dsn, "parked", "release", consumer, "order", "o-1")
    assert released.exit_code == 0, released.output
    again = ctl(mariadb_dsn, "parked", "release", consumer, "order", "o-1")
    assert again.exit_code == 2 and "is not parked" in again.output
