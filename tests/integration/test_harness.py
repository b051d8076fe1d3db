"""The plugin's in-process harness (`cdcbox.testing`): events through the real pipeline
against real PostgreSQL, no Kafka — deduplicated, version-guarded, dead-lettered and
parked exactly as a live consumer does, in per-record and in batch mode, for sync and
async handlers alike."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import psycopg
import pytest
from psycopg import sql

from cdcbox import wire
from cdcbox.consumer import AsyncHandler, Event, Handler, Outcome
from cdcbox.consumer.handler import BaseHandler
from cdcbox.producer.outbox import NewEvent
from cdcbox.testing import Harness
from tests.helpers import unique

pytestmark = pytest.mark.integration


class Ledger(Handler):
    """Appends each applied event to a table; an event whose payload says so fails."""

    event_types = frozenset({"Booked"})
    table: str

    def handle(self, event: Event, conn: psycopg.Connection[Any]) -> None:
        if event.payload.get("fail"):
            raise ValueError("cannot book this")
        conn.execute(
            sql.SQL("INSERT INTO {} VALUES (%s, %s)").format(sql.Identifier(self.table)),
            (event.aggregate_id, event.aggregate_version),
        )


class AsyncLedger(AsyncHandler):
    """`Ledger` with `async def handle` on the record's `AsyncConnection`."""

    event_types = frozenset({"Booked"})
    table: str

    async def handle(self, event: Event, conn: psycopg.AsyncConnection[Any]) -> None:
        if event.payload.get("fail"):
            raise ValueError("cannot book this")
        await conn.execute(
            sql.SQL("INSERT INTO {} VALUES (%s, %s)").format(sql.Identifier(self.table)),
            (event.aggregate_id, event.aggregate_version),
        )


@pytest.fixture(params=["sync", "async"])
def ledger(request: pytest.FixtureRequest) -> Callable[[str, str], BaseHandler]:
    """Makes a ledger handler of each flavour: every test below runs for both."""
    base = Ledger if request.param == "sync" else AsyncLedger
    return lambda aggregate_type, table: _ledger(base, aggregate_type, table)


def _ledger(base: type[BaseHandler], aggregate_type: str, table: str) -> BaseHandler:
    handler_class = type(
        "TestLedger",
        (base,),
        {"consumer_name": unique("ledger"), "aggregate_types": (aggregate_type,), "table": table},
    )
    handler: BaseHandler = handler_class()
    return handler


def ledger_table(db: psycopg.Connection[Any]) -> str:
    """A new table for a ledger handler to append to; its name."""
    table = unique("booked")
    db.execute(
        sql.SQL("CREATE TABLE {} (account text, version bigint)").format(sql.Identifier(table))
    )
    return table


@pytest.mark.parametrize("batch_mode", [False, True], ids=["per-record", "batch"])
def test_the_harness_runs_the_real_pipeline_without_kafka(
    cdcbox_harness: Callable[..., Harness],
    db: psycopg.Connection[Any],
    cdcbox_aggregate_type: str,
    batch_mode: bool,
    ledger: Callable[[str, str], BaseHandler],
) -> None:
    table = ledger_table(db)
    handler = ledger(cdcbox_aggregate_type, table)
    harness = cdcbox_harness([handler], batch_mode=batch_mode)
    event = lambda account, v, **p: NewEvent(  # noqa: E731
        cdcbox_aggregate_type, account, "Booked", p, aggregate_version=v
    )
    first = harness.record(event("a", 1))
    assert harness.send(first, harness.record(event("a", 2)), first) == Counter(
        {Outcome.PROCESSED: 2, Outcome.DUPLICATE: 1}
    )
    assert harness.send(event("a", 2)) == Counter({Outcome.STALE: 1})
    # A poison event is dead-lettered (after the harness's one quick retry), and its
    # aggregate's next event is parked behind it; other aggregates go on.
    assert harness.send(event("b", 1, fail=True), event("b", 2), event("c", 1)) == Counter(
        {Outcome.DEAD_LETTERED: 1, Outcome.PARKED: 1, Outcome.PROCESSED: 1}
    )
    letters = harness.dead_letters(wire.topic_for(cdcbox_aggregate_type))
    assert [r.key for r in letters] == [b"b", b"b"]  # the poison event, then the parked one
    assert dict(letters[0].headers)["cdcbox.error.type"] == b"ValueError"
    rows = db.execute(
        sql.SQL("SELECT account, version FROM {} ORDER BY account, version").format(
            sql.Identifier(table)
        )
    ).fetchall()
    assert rows == [("a", 1), ("a", 2), ("c", 1)]


@pytest.mark.parametrize("batch_mode", [False, True], ids=["per-record", "batch"])
def test_two_handlers_of_one_event_type_each_apply_it_under_their_own_name(
    cdcbox_harness: Callable[..., Harness],
    db: psycopg.Connection[Any],
    cdcbox_aggregate_type: str,
    batch_mode: bool,
    ledger: Callable[[str, str], BaseHandler],
) -> None:
    """Two services that both want `Booked` run in one process; a third handler of the
    same type on another topic gets nothing from this one."""
    tables = [ledger_table(db) for _ in range(3)]
    first, second = (ledger(cdcbox_aggregate_type, t) for t in tables[:2])
    elsewhere = ledger(cdcbox_aggregate_type + "x", tables[2])
    harness = cdcbox_harness([first, second, elsewhere], batch_mode=batch_mode)
    booked = harness.record(NewEvent(cdcbox_aggregate_type, "a", "Booked", {}, aggregate_version=1))
    assert harness.send(booked) == Counter({Outcome.PROCESSED: 2})
    assert harness.send(booked) == Counter({Outcome.DUPLICATE: 2})
    counts = [
        db.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(t))).fetchone()
        for t in tables
    ]
    assert counts == [(1,), (1,), (0,)]
