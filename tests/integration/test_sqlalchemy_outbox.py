"""The outbox through SQLAlchemy 2.x sessions (psycopg dialect) against real PostgreSQL:
append in the session's transaction, even before its first flush, and domain events
appended in `before_commit`, committed with the business rows or not at all."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql
from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from cdcbox.errors import SchemaError
from cdcbox.names import DbNames
from cdcbox.producer.outbox import NewEvent, Outbox
from cdcbox.producer.sqlalchemy import SessionEvents, append
from cdcbox.producer.unit_of_work import AggregateRoot
from tests.helpers import schema_with_orders

pytestmark = pytest.mark.integration


class Order(AggregateRoot):
    aggregate_type = "order"


@pytest.fixture
def names(database: str) -> DbNames:
    return schema_with_orders(database, "sqla")


@pytest.fixture
def engine(database: str, names: DbNames) -> Iterator[Engine]:
    url = database.replace("postgresql://", "postgresql+psycopg://", 1)
    engine = create_engine(url, connect_args={"options": f"-c search_path={names.schema}"})
    yield engine
    engine.dispose()


def outbox_and_orders(database: str, names: DbNames) -> tuple[list[tuple[Any, ...]], int]:
    with psycopg.connect(database) as conn:
        query = "SELECT aggregate_id, aggregate_version, event_type FROM {} ORDER BY id"
        events = conn.execute(sql.SQL(query).format(names.table("outbox"))).fetchall()
        orders = conn.execute(
            sql.SQL("SELECT count(*) FROM {}.orders").format(sql.Identifier(names.schema))
        ).fetchone()
    return events, int(orders[0]) if orders else 0


def test_append_works_before_the_sessions_first_flush_and_commits_with_it(
    database: str, names: DbNames, engine: Engine
) -> None:
    with Session(engine) as session:
        append(session, NewEvent("order", "a", "Created", {}), Outbox(names))  # first statement
        session.execute(text("INSERT INTO orders VALUES ('a')"))
        session.commit()
    with Session(engine) as session:
        append(session, NewEvent("order", "b", "Created", {}), Outbox(names))
        session.rollback()
    assert outbox_and_orders(database, names) == ([("a", 0, "Created")], 1)


def test_domain_events_are_appended_in_before_commit_or_not_at_all(
    database: str, names: DbNames, engine: Engine
) -> None:
    order = Order("c", version=2)
    with Session(engine) as session:
        events = SessionEvents(session, Outbox(names))
        events.track(order)
        session.execute(text("INSERT INTO orders VALUES ('c')"))
        order.record("Paid", {"n": 1})
        session.rollback()  # nothing written, the version given back
        assert order.version == 2
        order.record("Paid", {"n": 2})
        events.publish(NewEvent("audit", "c", "Noted", {}))
        session.execute(text("INSERT INTO orders VALUES ('c')"))
        session.commit()
    assert outbox_and_orders(database, names) == ([("c", 3, "Paid"), ("c", 0, "Noted")], 1)


def test_a_failing_append_fails_the_commit_and_keeps_the_business_rows_out(
    database: str, names: DbNames, engine: Engine
) -> None:
    with Session(engine) as session:
        events = SessionEvents(session, Outbox(names))
        session.execute(text("INSERT INTO orders VALUES ('d')"))
        events.publish(NewEvent("bad type", "d", "Created", {}))
        with pytest.raises(SchemaError, match="names the topic"):
            session.commit()
        session.rollback()
    assert outbox_and_orders(database, names) == ([], 0)


def duplicate_in_a_savepoint(session: Session, order: Order) -> None:
    with session.begin_nested():
        order.record("Duplicated", {})
        session.execute(text("INSERT INTO orders VALUES ('s')"))


def test_a_rolled_back_savepoint_forgets_only_its_own_events(
    database: str, names: DbNames, engine: Engine
) -> None:
    """Audit 26, case 4: SQLAlchemy ends a SAVEPOINT with a rollback event too; the events
    recorded before it must still be appended at commit."""
    order = Order("s")
    with Session(engine) as session:
        events = SessionEvents(session, Outbox(names))
        events.track(order)
        session.execute(text("INSERT INTO orders VALUES ('s')"))
        order.record("Placed", {})
        with pytest.raises(IntegrityError):  # the caller swallows it
            duplicate_in_a_savepoint(session, order)
        order.record("Paid", {})
        session.commit()
    assert outbox_and_orders(database, names) == ([("s", 1, "Placed"), ("s", 2, "Paid")], 1)
    assert order.version == 2


def test_a_failing_append_gives_the_aggregate_its_versions_back(
    database: str, names: DbNames, engine: Engine
) -> None:
    """Audit 26, case 5: a retry after a failed commit continues at the loaded version."""
    order = Order("v", version=3)
    with Session(engine) as session:
        events = SessionEvents(session, Outbox(names))
        events.track(order)
        order.record("Paid", {})
        events.publish(NewEvent("bad type", "v", "Created", {}))
        with pytest.raises(SchemaError):
            session.commit()
        session.rollback()
    assert order.version == 3
    with Session(engine) as session:
        SessionEvents(session, Outbox(names)).track(order)
        order.record("Paid", {})
        session.commit()
    assert outbox_and_orders(database, names) == ([("v", 4, "Paid")], 0)
