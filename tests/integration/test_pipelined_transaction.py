"""`cdcbox.db.pipelined_transaction` costs the round trips its docstring promises: a block
that reads one result and then only writes waits for the server twice (the read, and
COMMIT with the writes), counted as the times psycopg blocks for the server. Before,
psycopg's `conn.transaction()` inside the pipeline synced BEGIN on entry and the block's
writes before COMMIT: five waits for the same block."""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from typing import Any

import psycopg
import pytest
from psycopg.waiting import Wait

from cdcbox.db import connect, pipelined_transaction
from cdcbox.names import DbNames
from cdcbox.postgres.relay_store import RelayStore
from cdcbox.producer.outbox import NewEvent, Outbox
from cdcbox.seam.relay import OutboxRow
from tests.helpers import migrated_schema, unique

pytestmark = pytest.mark.integration


@pytest.fixture
def conn(database: str) -> Iterator[psycopg.Connection[Any]]:
    with connect(database, autocommit=True) as c:
        c.execute("CREATE TABLE IF NOT EXISTS pipelined_probe (id int PRIMARY KEY)")
        c.execute("TRUNCATE pipelined_probe")
        yield c


def waits(conn: psycopg.Connection[Any], block: Callable[[], object]) -> int:
    """How often the client blocked for the server's answers while `block` ran: each of
    psycopg's waits on the connection that had to wait for the socket to be readable
    (an answer already read in passing, while sending, is no wait)."""
    count = 0
    original = conn.wait

    def wait(gen: Generator[Any, Any, Any], *args: Any, **kwargs: Any) -> Any:
        def watched() -> Generator[Any, Any, Any]:
            nonlocal count
            counted = False
            try:
                state = next(gen)
                while True:
                    if state == Wait.R and not counted:
                        count, counted = count + 1, True
                    state = gen.send((yield state))
            except StopIteration as stop:
                return stop.value

        return original(watched(), *args, **kwargs)

    conn.wait = wait  # type: ignore[method-assign]
    try:
        block()
    finally:
        del conn.wait
    return count


def test_a_read_then_writes_waits_twice(conn: psycopg.Connection[Any]) -> None:
    def block() -> None:
        with pipelined_transaction(conn):
            assert conn.execute("SELECT count(*) FROM pipelined_probe").fetchone() == (0,)
            conn.execute("INSERT INTO pipelined_probe VALUES (1)")
            conn.execute("INSERT INTO pipelined_probe VALUES (2)")

    assert waits(conn, block) == 2  # BEGIN travels with the read, COMMIT with the writes
    assert conn.execute("SELECT count(*) FROM pipelined_probe").fetchone() == (2,)


def test_a_failed_write_rolls_the_whole_block_back(conn: psycopg.Connection[Any]) -> None:
    def duplicate() -> None:
        with pipelined_transaction(conn):
            conn.execute("INSERT INTO pipelined_probe VALUES (1)")
            conn.execute("INSERT INTO pipelined_probe VALUES (1)")

    with pytest.raises(psycopg.errors.UniqueViolation):
        duplicate()
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert conn.execute("SELECT count(*) FROM pipelined_probe").fetchone() == (0,)


def test_an_exception_in_the_block_rolls_it_back(conn: psycopg.Connection[Any]) -> None:
    def failing_handler() -> None:
        with pipelined_transaction(conn):
            conn.execute("INSERT INTO pipelined_probe VALUES (1)")
            assert conn.execute("SELECT 1").fetchone() == (1,)
            raise RuntimeError("handler")

    with pytest.raises(RuntimeError, match="handler"):
        failing_handler()
    assert conn.execute("SELECT count(*) FROM pipelined_probe").fetchone() == (0,)


def test_commit_inside_is_refused_and_a_savepoint_nests(conn: psycopg.Connection[Any]) -> None:
    with pipelined_transaction(conn):
        conn.execute("INSERT INTO pipelined_probe VALUES (1)")
        with pytest.raises(psycopg.ProgrammingError, match="commit"):
            conn.commit()
        with pytest.raises(psycopg.errors.UniqueViolation), conn.transaction():
            conn.execute("INSERT INTO pipelined_probe VALUES (1)")  # a savepoint rolls back
        conn.execute("INSERT INTO pipelined_probe VALUES (2)")
    assert conn.execute("SELECT id FROM pipelined_probe ORDER BY id").fetchall() == [(1,), (2,)]


def test_the_relays_claim_waits_twice_and_its_mark_once(database: str) -> None:
    """The polling relay's claim (the setting and the claim's read, then the lease with
    COMMIT) and its mark (BEGIN, UPDATE, COMMIT) as their docstrings count them."""
    names = migrated_schema(database, DbNames(schema=unique("relay_trips")))
    with connect(database, autocommit=True) as conn:
        with conn.transaction():
            Outbox(names).append(conn, NewEvent("order", "o1", "Placed", {"n": 1}))
        store = RelayStore(names)
        claimed: list[OutboxRow] = []
        claim = waits(
            conn, lambda: claimed.extend(store.claim(conn, "w1", 10, 30.0, ordered=False))
        )
        assert [r.aggregate_id for r in claimed] == ["o1"]
        mark = waits(conn, lambda: store.mark_sent(conn, "w1", [claimed[0].id]))
    assert (claim, mark) == (2, 1)


def test_a_savepoint_after_a_read_nests(conn: psycopg.Connection[Any]) -> None:
    # Failed before BEGIN was followed by a Sync: the read only flushed, libpq still
    # said the session was idle, and `conn.transaction()` took itself for the outer one
    # (AssertionError in psycopg, then OutOfOrderTransactionNesting).
    with pipelined_transaction(conn):
        conn.execute("INSERT INTO pipelined_probe VALUES (1)")
        assert conn.execute("SELECT count(*) FROM pipelined_probe").fetchone() == (1,)
        with pytest.raises(psycopg.errors.UniqueViolation), conn.transaction():
            conn.execute("INSERT INTO pipelined_probe VALUES (1)")
        conn.execute("INSERT INTO pipelined_probe VALUES (2)")
    assert conn.execute("SELECT id FROM pipelined_probe ORDER BY id").fetchall() == [(1,), (2,)]
