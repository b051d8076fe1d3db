"""Consumers on MariaDB (issue 37): a handler's service keeps its inbox, versions and
parked aggregates in MariaDB with the guarantees it has on PostgreSQL. The events come
as a fleet's do (a PostgreSQL service's outbox, Debezium, Kafka), and one handler class,
written once, runs on either database: each test runs on both."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from click.testing import CliRunner

from cdcbox import AsyncSession, Session, wire
from cdcbox.cli.main import cli
from cdcbox.consumer import (
    AsyncHandler,
    Consumer,
    ConsumerConfig,
    Event,
    Handler,
    Outcome,
    RetryPolicy,
)
from cdcbox.consumer.handler import BaseHandler
from cdcbox.consumer.signals import RefuseTransition
from cdcbox.names import DbNames
from cdcbox.producer.outbox import NewEvent
from cdcbox.stack.endpoints import Endpoints
from consumer.points import MARIADB_TABLES
from tests.e2e.conftest import Running, running_in_thread
from tests.e2e.test_consumer_failures import dead_letters, write
from tests.e2e.test_readme import block
from tests.helpers import database_session, eventually, unique

pytestmark = pytest.mark.e2e

FAST_RETRY = RetryPolicy(max_attempts=3, initial_delay_s=0.01, max_delay_s=0.05)
# The effects table: DDL both databases accept, like the handler's SQL.
EFFECTS_DDL = (
    "CREATE TABLE {} (consumer_name VARCHAR(200) NOT NULL, event_id CHAR(36) NOT NULL, "
    "aggregate_id VARCHAR(200) NOT NULL, version BIGINT)"
)


def portable_handler(
    name: str,
    aggregate_type: str,
    effects: str,
    fail: Callable[[Event], bool] | None = None,
    flavour: str = "sync",
) -> BaseHandler:
    """One handler class for both databases: `conn` is a `Session` (an `AsyncSession`
    for the "async" flavour), its SQL plain. Each applied event is a row in `effects`
    and an answer emitted to the service's own outbox (ANSWER_TYPE)."""
    insert = (
        f"INSERT INTO {effects} (consumer_name, event_id, aggregate_id, version) "
        "VALUES (%s, %s, %s, %s)"
    )

    def checked(event: Event) -> tuple[tuple[Any, ...], NewEvent]:
        if fail is not None and fail(event):
            raise RuntimeError(f"handler refuses {event.event_id}")
        if event.event_type == "Refused":
            raise RefuseTransition("not from this state")
        row = (name, str(event.event_id), event.aggregate_id, event.aggregate_version)
        answer = NewEvent(aggregate_type + ANSWER_TYPE, event.aggregate_id, "Answered", {})
        return row, answer

    class Recorder(Handler):
        consumer_name = name
        aggregate_types = (aggregate_type,)
        event_types = frozenset({"Created", "Refused"})

        def handle(self, event: Event, conn: Session) -> None:
            row, answer = checked(event)
            conn.execute(insert, row)
            self.emit(conn, event, answer)

    class AsyncRecorder(AsyncHandler):
        consumer_name = name
        aggregate_types = (aggregate_type,)
        event_types = frozenset({"Created", "Refused"})

        async def handle(self, event: Event, conn: AsyncSession) -> None:
            row, answer = checked(event)
            async with conn.transaction():  # a savepoint, on either database
                await conn.execute(insert, row)
            await self.emit(conn, event, answer)

    return AsyncRecorder() if flavour == "async" else Recorder()


ANSWER_TYPE = "-answer"


@dataclass(frozen=True)
class Database:
    """A consumer's database in a test: its DSN and an effects table of its own; the
    consumer's tables are the stack's (what `cdc-ctl` finds by default), tests keep
    apart by consumer name."""

    dsn: str
    effects: str
    names: DbNames = DbNames()

    def rows(self, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
        """The rows of a query, UUIDs as text (MariaDB keeps them as CHAR(36))."""
        with database_session(self.dsn) as conn:
            rows = conn.execute(statement, params).fetchall()
        return [tuple(str(v) if isinstance(v, uuid.UUID) else v for v in r) for r in rows]

    def effects_of(self, consumer: str) -> list[tuple[str, int | None]]:
        return [
            (r[0], r[1])
            for r in self.rows(
                f"SELECT aggregate_id, version FROM {self.effects} WHERE consumer_name = %s "
                "ORDER BY aggregate_id, version",
                (consumer,),
            )
        ]


@pytest.fixture(params=["postgresql", "mariadb"])
def database(request: pytest.FixtureRequest, stack: Endpoints) -> Database:
    mariadb = request.param == "mariadb"
    db = Database(request.getfixturevalue("mariadb_dsn") if mariadb else stack.dsn, unique("e"))
    with database_session(db.dsn) as conn:
        conn.execute(EFFECTS_DDL.format(db.effects))
    return db


@contextmanager
def consuming(
    stack: Endpoints, database: Database, handler: BaseHandler, group: str, **options: Any
) -> Iterator[Running]:
    config = ConsumerConfig(
        bootstrap_servers=stack.bootstrap_servers,
        dsn=database.dsn,
        group_id=group,
        auto_offset_reset="earliest",
        **options,
    )
    consumer = Consumer([handler], config, database.names)
    with running_in_thread(consumer, f"consumer-{group}") as running:
        yield running


@pytest.mark.parametrize("flavour", ["sync", "async"])
@pytest.mark.parametrize("batch_mode", [False, True], ids=["per-record", "batch"])
def test_each_event_applies_once_in_version_order(
    stack: Endpoints, database: Database, batch_mode: bool, flavour: str
) -> None:
    """Versions 1-3 of a1 and 1 of a2 apply, each emitting one answer; a1's version 2
    sent again under a new id is stale; a refused transition is recorded for
    reconciliation. Read again from the start in another group, every event is a
    duplicate: nothing applies or is emitted twice."""
    aggregate_type, name = unique("order"), unique("c")
    events = [
        NewEvent(aggregate_type, "a1", "Created", {}, aggregate_version=1),
        NewEvent(aggregate_type, "a2", "Created", {}, aggregate_version=1),
        NewEvent(aggregate_type, "a1", "Created", {}, aggregate_version=2),
        NewEvent(aggregate_type, "a1", "Created", {}, aggregate_version=3),
        NewEvent(aggregate_type, "a1", "Created", {}, aggregate_version=2),
        NewEvent(aggregate_type, "a2", "Refused", {}, aggregate_version=2),
    ]
    ids = write(stack.dsn, events)
    handler = portable_handler(name, aggregate_type, database.effects, flavour=flavour)
    with consuming(stack, database, handler, name, batch_mode=batch_mode) as running:
        eventually(lambda: running.stats.total == len(events), what="every event ended")
        counts = {o: running.stats[o] for o in (Outcome.PROCESSED, Outcome.STALE)}
        assert counts == {Outcome.PROCESSED: 4, Outcome.STALE: 1}
        assert running.stats[Outcome.REFUSED] == 1
    expected = [("a1", 1), ("a1", 2), ("a1", 3), ("a2", 1)]
    assert database.effects_of(name) == expected
    reconciled = database.rows(
        f"SELECT event_id FROM {database.names.reconciliation} WHERE consumer_name = %s",
        (name,),
    )
    assert reconciled == [(str(ids[5]),)]
    applied = {str(i) for i in ids[:4]}
    assert answers(database, aggregate_type) == applied
    again = unique("g")
    with consuming(
        stack, database, handler, again, batch_mode=batch_mode, move_to_group=True
    ) as running:
        eventually(lambda: running.stats.total == len(events), what="every event again")
        assert running.stats[Outcome.DUPLICATE] == len(events)
    assert database.effects_of(name) == expected
    assert answers(database, aggregate_type) == applied


def answers(database: Database, aggregate_type: str) -> set[str]:
    """The causation ids of the answers in the consumer's own outbox: one per cause."""
    rows = database.rows(
        "SELECT causation_id FROM outbox_event WHERE aggregate_type = %s",
        (aggregate_type + ANSWER_TYPE,),
    )
    causes = [r[0] for r in rows]
    assert len(causes) == len(set(causes)), causes
    return set(causes)


def test_a_failing_event_is_dead_lettered_parked_and_replayed(
    stack: Endpoints, database: Database
) -> None:
    """broken's first event fails its retries: dead-lettered, broken parked (its second
    event dead-lettered behind it), fine applied. Fixed, `cdc-ctl dlq replay` puts both
    back: applied in order, and the last one's commit releases the park."""
    aggregate_type, name = unique("order"), unique("c")
    ids = write(
        stack.dsn,
        [
            NewEvent(aggregate_type, "broken", "Created", {}, aggregate_version=1),
            NewEvent(aggregate_type, "broken", "Created", {}, aggregate_version=2),
            NewEvent(aggregate_type, "fine", "Created", {}, aggregate_version=1),
        ],
    )
    broken = [True]
    handler = portable_handler(
        name, aggregate_type, database.effects, lambda e: broken[0] and e.event_id == ids[0]
    )
    with consuming(stack, database, handler, name, retry=FAST_RETRY) as running:
        eventually(lambda: running.stats[Outcome.PARKED] == 1, what="the later event parked")
        assert running.stats[Outcome.DEAD_LETTERED] == 1
        assert running.stats.retries == FAST_RETRY.max_attempts - 1
        assert database.effects_of(name) == [("fine", 1)]
        failed = database.rows(
            f"SELECT event_id, retry_count, error_message FROM {database.names.inbox} "
            "WHERE consumer_name = %s AND status = 'FAILED' ORDER BY source_offset",
            (name,),
        )
        assert [r[0] for r in failed] == [str(i) for i in ids[:2]]
        assert failed[0][1] == FAST_RETRY.max_attempts and "handler refuses" in failed[0][2]
        parked = json.loads(ctl(database.dsn, "parked", "list", "--json"))
        assert [(p["aggregate_id"], p["event_id"]) for p in parked if p["consumer"] == name] == [
            ("broken", str(ids[0]))
        ]
        dlq = wire.topic_for(aggregate_type) + ".dlq"
        letters = dead_letters(stack, dlq, expect=2)
        assert [dict(r.headers)["id"] for r in letters] == [str(i).encode() for i in ids[:2]]
        broken[0] = False
        assert "replayed 2" in ctl(database.dsn, "dlq", "replay", dlq, "--all", "--yes")
        eventually(
            lambda: database.effects_of(name) == [("broken", 1), ("broken", 2), ("fine", 1)],
            what="the replayed events applied in order",
        )
        eventually(
            lambda: not [p for p in json.loads(ctl(database.dsn, "parked", "list", "--json"))
                         if p["consumer"] == name],
            what="the park released",
        )  # fmt: skip


def ctl(dsn: str, *args: str) -> str:
    """`cdc-ctl --dsn DSN ARGS` against the stack's Kafka; its output (exit code 0)."""
    result = CliRunner().invoke(cli, ["--dsn", dsn, *args])
    assert result.exit_code == 0, result.output
    return result.output


def test_the_guides_handler_runs_on_mariadb(stack: Endpoints, mariadb_dsn: str) -> None:
    """docs/guides/mariadb.md's handler, as written, under a consumer name and aggregate
    type of this test's own."""
    aggregate_type, name = unique("order"), unique("points")
    scope: dict[str, Any] = {}
    exec(block("def handle(self, event: Event, conn: Session)"), scope)  # noqa: S102

    guides: type[Handler] = scope["PointsHandler"]
    points = type(
        "Points", (guides,), {"consumer_name": name, "aggregate_types": (aggregate_type,)}
    )

    with database_session(mariadb_dsn) as conn:
        conn.execute(MARIADB_TABLES)
    orders = [unique("o") for _ in range(2)]
    write(
        stack.dsn,
        [
            NewEvent(aggregate_type, order, "OrderCreated",
                     {"order_id": order, "customer_id": "c-1", "total_cents": 4250})
            for order in orders
        ],
    )  # fmt: skip
    with consuming(stack, Database(mariadb_dsn, ""), points(), name) as running:
        eventually(lambda: running.stats[Outcome.PROCESSED] == 2, what="both orders applied")
    with database_session(mariadb_dsn) as conn:
        rows = conn.execute(
            "SELECT order_id, points FROM points_pending WHERE order_id IN (%s, %s)", orders
        ).fetchall()
    assert sorted(rows) == sorted((order, 42) for order in orders)
