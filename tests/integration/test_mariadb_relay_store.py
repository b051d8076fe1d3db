"""The polling relay's claim and settling on a real MariaDB: SKIP LOCKED never waits on
another worker, an aggregate's later row waits for its earlier one, a lease is honoured
until it expires, and failures back off or go DEAD."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from cdcbox.errors import DatabaseUnavailable, UsageError
from cdcbox.mariadb import MariaDbOutbox, connect
from cdcbox.mariadb.relay_store import MariaDbRelayDatabase, MariaDbRelayStore
from cdcbox.names import DbNames
from cdcbox.producer.outbox import NewEvent
from cdcbox.relay import RelayConfig, RelayWorker
from tests.helpers import eventually, mariadb_outbox, unique

pytestmark = pytest.mark.integration


@pytest.fixture
def names(mariadb_dsn: str) -> DbNames:
    return mariadb_outbox(mariadb_dsn)


@pytest.fixture
def conn(mariadb_dsn: str) -> Iterator[Any]:
    c = connect(mariadb_dsn)
    with c.cursor() as cur:  # a claim that waited on a lock would fail in 2 s, not hang
        cur.execute("SET SESSION innodb_lock_wait_timeout = 2")
    yield c
    c.close()


def append(dsn: str, names: DbNames, *aggregate_ids: str) -> list[int]:
    writer = connect(dsn)
    try:
        MariaDbOutbox(names).append_many(
            writer, [NewEvent("order", a, "Changed", {"n": i}) for i, a in enumerate(aggregate_ids)]
        )
        writer.commit()
        with writer.cursor() as cur:
            cur.execute(f"SELECT id FROM {names.outbox} ORDER BY id")
            return [r[0] for r in cur.fetchall()]
    finally:
        writer.close()


def status(conn: Any, names: DbNames) -> dict[int, tuple[str, int]]:
    conn.commit()
    with conn.cursor() as cur:
        cur.execute(f"SELECT id, status, retry_count FROM {names.outbox}")
        found = {i: (s, n) for i, s, n in cur.fetchall()}
    conn.commit()
    return found


def test_a_claim_skips_rows_another_transaction_holds(
    mariadb_dsn: str, names: DbNames, conn: Any
) -> None:
    ids = append(mariadb_dsn, names, "a", "b", "c", "d")
    store = MariaDbRelayStore(names)
    holder = connect(mariadb_dsn)
    try:
        with holder.cursor() as cur:  # another worker's claim of two rows, still open
            cur.execute("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
            holder.begin()
            cur.execute(store.claim_queries[-1], (2,))  # PENDING rows
            assert [r[0] for r in cur.fetchall()] == ids[:2]
        claimed = store.claim(conn, "w2", 10, 30.0, ordered=True)
        assert [r.id for r in claimed] == ids[2:]
        holder.rollback()
        assert [r.id for r in store.claim(conn, "w2", 10, 30.0, ordered=True)] == ids[:2]
    finally:
        holder.close()


def test_an_aggregates_later_row_waits_for_its_earlier_one_when_ordered(
    mariadb_dsn: str, names: DbNames, conn: Any
) -> None:
    first, later, other = append(mariadb_dsn, names, "a", "a", "b")
    store = MariaDbRelayStore(names)
    holder = connect(mariadb_dsn)
    try:
        with holder.cursor() as cur:  # "a"'s first row is another worker's, in flight
            cur.execute("SET TRANSACTION ISOLATION LEVEL READ COMMITTED")
            holder.begin()
            cur.execute(store.claim_queries[-1], (1,))
            assert [r[0] for r in cur.fetchall()] == [first]
        assert [r.id for r in store.claim(conn, "w", 10, 30.0, ordered=True)] == [other]
        assert [r.id for r in store.claim(conn, "w", 10, 30.0, ordered=False)] == [later]
    finally:
        holder.close()


def test_a_lease_is_honoured_until_it_expires(mariadb_dsn: str, names: DbNames, conn: Any) -> None:
    (row,) = append(mariadb_dsn, names, "a")
    store = MariaDbRelayStore(names)
    assert [r.id for r in store.claim(conn, "w1", 10, 0.5, ordered=True)] == [row]
    assert store.claim(conn, "w2", 10, 30.0, ordered=True) == []  # leased to w1
    assert store.mark_sent(conn, "w2", [row]) == 0
    taken = eventually(
        lambda: store.claim(conn, "w2", 10, 30.0, ordered=True),
        timeout=10,
        what="w1's lease to expire and w2 to take the row",
    )
    assert [r.id for r in taken] == [row]  # the expired lease was taken over
    assert store.mark_sent(conn, "w1", [row]) == 0  # the late worker overwrites nothing
    assert store.mark_sent(conn, "w2", [row]) == 1
    assert status(conn, names) == {row: ("SENT", 0)}
    assert store.claim(conn, "w3", 10, 30.0, ordered=True) == []


def test_failures_back_off_go_dead_and_released_rows_spend_nothing(
    mariadb_dsn: str, names: DbNames, conn: Any
) -> None:
    retried, permanent, last, released = append(mariadb_dsn, names, "a", "b", "c", "d")
    store = MariaDbRelayStore(names)
    store.claim(conn, "w", 10, 30.0, ordered=True)
    with conn.cursor() as cur:  # "c" has used all but one of its attempts
        cur.execute(f"UPDATE {names.outbox} SET retry_count = 2 WHERE id = %s", (last,))
    conn.commit()
    failures = [(retried, 60.0, "timeout", False), (permanent, 0.0, "too large", True)]
    failures.append((last, 0.0, "timeout", False))
    assert store.mark_failed(conn, "w", 3, failures) == 3
    assert store.release(conn, "w", [released]) == 1
    assert status(conn, names) == {
        retried: ("RETRY", 1),
        permanent: ("DEAD", 1),
        last: ("DEAD", 3),
        released: ("PENDING", 0),
    }
    # The RETRY row is not due for a minute; the released one is due at once.
    assert [r.id for r in store.claim(conn, "w", 10, 30.0, ordered=True)] == [released]


def test_a_relay_on_an_outbox_never_migrated_is_refused(mariadb_dsn: str) -> None:
    config = RelayConfig(dsn=mariadb_dsn, bootstrap_servers="127.0.0.1:1", worker_id="w")
    worker = RelayWorker(config, names=DbNames(outbox=unique("missing")))
    try:
        with pytest.raises(UsageError, match=r"no outbox table 'missing_\w+'.*db migrate"):
            worker.run_once()
    finally:
        worker.close()


def test_a_session_the_server_ended_is_an_outage_and_the_next_claim_reconnects(
    mariadb_dsn: str, names: DbNames
) -> None:
    (row,) = append(mariadb_dsn, names, "a")
    database = MariaDbRelayDatabase(mariadb_dsn, names, lease_check=True)
    try:
        database.open(listen=False)
        session_id = database.sessions().raw.thread_id()
        killer = connect(mariadb_dsn, autocommit=True)
        try:
            with killer.cursor() as cur:
                cur.execute("KILL %s", (session_id,))
        finally:
            killer.close()
        with pytest.raises(DatabaseUnavailable, match=r"MariaDB at cdcbox@.* went away"):
            database.claim("w", 10, 30.0, ordered=True)
        assert [r.id for r in database.claim("w", 10, 30.0, ordered=True)] == [row]
    finally:
        database.close()
