"""What is particular to async handlers (the cases shared with sync handlers run for both
flavours in test_harness.py and the e2e suites): their writes are in the record's
transaction, their loop outlives a record, and they run from a thread with a loop."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from psycopg import sql

from cdcbox.consumer import AsyncHandler, Event, Outcome
from cdcbox.errors import ConfigError
from cdcbox.producer.outbox import NewEvent
from cdcbox.testing import Harness
from tests.helpers import unique

pytestmark = pytest.mark.integration


class Writer(AsyncHandler):
    """Writes a row, then fails when the payload says so; remembers its loops."""

    event_types = frozenset({"Booked"})
    table: str

    def __init__(self) -> None:
        self.loops: list[asyncio.AbstractEventLoop] = []

    async def handle(self, event: Event, conn: psycopg.AsyncConnection[Any]) -> None:
        self.loops.append(asyncio.get_running_loop())
        insert = sql.SQL("INSERT INTO {} VALUES (%s, %s)").format(sql.Identifier(self.table))
        await conn.execute(insert, (event.aggregate_id, "main"))
        if event.payload.get("savepoint"):
            try:
                async with conn.transaction():
                    await conn.execute(insert, (event.aggregate_id, "savepoint"))
                    raise LookupError("only the savepoint is undone")
            except LookupError:
                pass
        if event.payload.get("fail"):
            raise ValueError("fails after writing")


@pytest.fixture
def writer(db: psycopg.Connection[Any], cdcbox_aggregate_type: str) -> Writer:
    table = unique("written")
    db.execute(sql.SQL("CREATE TABLE {} (account text, step text)").format(sql.Identifier(table)))
    handler_class = type(
        "TestWriter",
        (Writer,),
        {"consumer_name": unique("writer"), "aggregate_types": (cdcbox_aggregate_type,)},
    )
    handler: Writer = handler_class()
    handler.table = table
    return handler


def rows(db: psycopg.Connection[Any], table: str) -> list[tuple[Any, ...]]:
    query = sql.SQL("SELECT account, step FROM {} ORDER BY account, step")
    return db.execute(query.format(sql.Identifier(table))).fetchall()


@pytest.mark.parametrize("batch_mode", [False, True], ids=["per-record", "batch"])
def test_an_async_handlers_writes_commit_and_roll_back_with_the_records_transaction(
    cdcbox_harness: Callable[..., Harness],
    db: psycopg.Connection[Any],
    cdcbox_aggregate_type: str,
    writer: Writer,
    batch_mode: bool,
) -> None:
    harness = cdcbox_harness([writer], batch_mode=batch_mode)
    booked = lambda account, **p: NewEvent(  # noqa: E731
        cdcbox_aggregate_type, account, "Booked", p, aggregate_version=1
    )
    outcomes = harness.send(
        booked("fine"), booked("poison", fail=True), booked("nested", savepoint=True)
    )
    assert outcomes == Counter({Outcome.PROCESSED: 2, Outcome.DEAD_LETTERED: 1})
    # The poison event's row was written on the AsyncConnection, then rolled back with
    # the record's transaction (its inbox row says FAILED, nothing of it is applied).
    assert rows(db, writer.table) == [("fine", "main"), ("nested", "main")]
    assert len(set(writer.loops)) == 1, "one loop for every record"


def test_async_handlers_run_when_the_calling_thread_already_runs_a_loop(
    cdcbox_harness: Callable[..., Harness],
    db: psycopg.Connection[Any],
    cdcbox_aggregate_type: str,
    writer: Writer,
) -> None:
    harness = cdcbox_harness([writer])

    async def from_an_asyncio_application() -> Counter[Outcome]:
        event = NewEvent(cdcbox_aggregate_type, "a", "Booked", {}, aggregate_version=1)
        return harness.send(event)

    assert asyncio.run(from_an_asyncio_application()) == Counter({Outcome.PROCESSED: 1})
    assert rows(db, writer.table) == [("a", "main")]


def test_an_async_handler_cannot_be_pipelined(
    cdcbox_harness: Callable[..., Harness], cdcbox_aggregate_type: str
) -> None:
    class Pipelined(AsyncHandler):
        consumer_name = unique("p")
        aggregate_types = (cdcbox_aggregate_type,)
        event_types = frozenset({"Booked"})
        pipelined = True

    with pytest.raises(ConfigError, match="Pipelined: an AsyncHandler cannot be pipelined"):
        cdcbox_harness([Pipelined()])
