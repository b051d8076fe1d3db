"""The outbox on a real MariaDB: an event commits or rolls back with the business change,
is checked before anything is written, and is stored with the columns the relay reads."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest

from cdcbox.errors import SchemaError, UsageError
from cdcbox.mariadb import MariaDbOutbox, connect, migrate
from cdcbox.names import DbNames
from cdcbox.producer.outbox import NewEvent
from tests.e2e.test_readme import block
from tests.helpers import mariadb_outbox, unique

pytestmark = pytest.mark.integration


@pytest.fixture
def names(mariadb_dsn: str) -> DbNames:
    return mariadb_outbox(mariadb_dsn)


def rows(dsn: str, names: DbNames) -> list[tuple[Any, ...]]:
    conn = connect(dsn, autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT event_id, aggregate_id, aggregate_version, payload, trace_id, "
                f"created_at, occurred_at, status FROM {names.outbox} ORDER BY id"
            )
            return list(cur.fetchall())
    finally:
        conn.close()


def test_an_event_commits_and_rolls_back_with_the_business_change(
    mariadb_dsn: str, names: DbNames
) -> None:
    outbox = MariaDbOutbox(names)
    conn = connect(mariadb_dsn)
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE TABLE IF NOT EXISTS {names.outbox}_orders (id VARCHAR(20))")
        kept = outbox.append(conn, NewEvent("order", "o-1", "Created", {"é": [1]}, 3, trace_id=""))
        conn.commit()
        with conn.cursor() as cur:
            cur.execute(f"INSERT INTO {names.outbox}_orders VALUES ('o-2')")
        outbox.append(conn, NewEvent("order", "o-2", "Created", {}))
        conn.rollback()
    finally:
        conn.close()
    (row,) = rows(mariadb_dsn, names)
    event_id, aggregate_id, version, payload, trace_id, created_at, occurred_at, status = row
    assert (uuid.UUID(event_id), aggregate_id, version) == (kept, "o-1", 3)
    assert payload == '{"é":[1]}'.encode()
    assert (trace_id, status) == ("", "PENDING")
    # One clock reading, as the PostgreSQL outbox: the header is the record timestamp.
    assert occurred_at == created_at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_many_events_are_one_statement_at_one_instant(mariadb_dsn: str, names: DbNames) -> None:
    conn = connect(mariadb_dsn)
    try:
        events = [NewEvent("order", f"o-{i}", "Created", {"i": i}) for i in range(50)]
        ids = MariaDbOutbox(names).append_many(conn, events)
        conn.commit()
    finally:
        conn.close()
    stored = rows(mariadb_dsn, names)
    assert [uuid.UUID(r[0]) for r in stored] == ids
    assert len({r[5] for r in stored}) == 1


def test_a_bad_event_or_autocommit_is_refused_before_anything_is_written(
    mariadb_dsn: str, names: DbNames
) -> None:
    outbox = MariaDbOutbox(names)
    conn = connect(mariadb_dsn)
    try:
        with pytest.raises(SchemaError, match="aggregate_type may hold only"):
            outbox.append_many(
                conn,
                [NewEvent("order", "o-1", "Created", {}), NewEvent("or der", "o-2", "X", {})],
            )
        conn.commit()
    finally:
        conn.close()
    auto = connect(mariadb_dsn, autocommit=True)
    try:
        with pytest.raises(UsageError, match="autocommit"):
            outbox.append(auto, NewEvent("order", "o-3", "Created", {}))
    finally:
        auto.close()
    assert rows(mariadb_dsn, names) == []


def test_migrate_is_idempotent_when_two_run_at_once(mariadb_dsn: str) -> None:
    names = DbNames(outbox=unique("outbox"), migrations=unique("migrations"))
    applied: list[list[str]] = []

    def run() -> None:
        conn = connect(mariadb_dsn)
        try:
            applied.append(migrate(conn, names))
        finally:
            conn.close()

    threads = [threading.Thread(target=run) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(applied) == [[], ["0001_outbox", "0002_inbox"]]
    assert rows(mariadb_dsn, names) == []  # the table is there, empty


def test_the_guides_example_runs_as_written(mariadb_dsn: str) -> None:
    """docs/guides/mariadb.md's producer, on the default outbox the session migrated."""
    order_id = unique("o")
    conn = connect(mariadb_dsn, autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute(
                "CREATE TABLE IF NOT EXISTS orders (id VARCHAR(64) PRIMARY KEY, status TEXT)"
            )
            cur.execute("INSERT INTO orders VALUES (%s, 'NEW')", (order_id,))
        exec(block("outbox = MariaDbOutbox()"), {"dsn": mariadb_dsn, "order_id": order_id})  # noqa: S102
        with conn.cursor() as cur:
            cur.execute("SELECT status FROM orders WHERE id = %s", (order_id,))
            assert cur.fetchone() == ("PLACED",)
            cur.execute(
                "SELECT event_type, aggregate_version, payload FROM outbox_event "
                "WHERE aggregate_id = %s",
                (order_id,),
            )
            assert list(cur.fetchall()) == [("OrderPlaced", 3, b'{"total":42}')]
    finally:
        conn.close()
