"""Domain events recorded by business code and appended right before COMMIT, against
real PostgreSQL: written with the business change, or not at all."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from psycopg import sql

from cdcbox.errors import SchemaError
from cdcbox.names import DbNames
from cdcbox.producer.outbox import NewEvent, Outbox
from cdcbox.producer.unit_of_work import AggregateRoot, UnitOfWork
from tests.helpers import schema_with_orders

pytestmark = pytest.mark.integration


class Order(AggregateRoot):
    aggregate_type = "order"

    def pay(self, amount: int) -> None:
        self.record("OrderPaid", {"order_id": self.aggregate_id, "amount": amount})


@pytest.fixture
def names(database: str) -> DbNames:
    return schema_with_orders(database, "uow")


def business(conn: psycopg.Connection[Any], names: DbNames, order_id: str) -> None:
    conn.execute(
        sql.SQL("INSERT INTO {}.orders VALUES (%s)").format(sql.Identifier(names.schema)),
        (order_id,),
    )


def written(database: str, names: DbNames) -> tuple[list[tuple[str, int, str]], int]:
    with psycopg.connect(database) as conn:
        events = conn.execute(
            sql.SQL(
                "SELECT aggregate_id, aggregate_version, event_type FROM {} ORDER BY id"
            ).format(names.table("outbox"))
        ).fetchall()
        orders = conn.execute(
            sql.SQL("SELECT count(*) FROM {}.orders").format(sql.Identifier(names.schema))
        ).fetchone()
    return events, int(orders[0]) if orders else 0


def test_events_are_appended_before_commit_in_recording_order_across_aggregates(
    database: str, names: DbNames
) -> None:
    a, b = Order("a", version=4), Order("b")  # "a" was loaded at version 4
    with psycopg.connect(database) as conn, UnitOfWork(conn, Outbox(names)) as uow:
        business(conn, names, "a")
        uow.track(a, b)
        a.pay(10)
        b.pay(20)
        uow.publish(NewEvent("audit", "x", "Noted", {}))
        a.pay(30)
    events, orders = written(database, names)
    assert events == [
        ("a", 5, "OrderPaid"),
        ("b", 1, "OrderPaid"),
        ("x", 0, "Noted"),
        ("a", 6, "OrderPaid"),
    ]
    assert orders == 1
    assert a.pending_events == [] and a.version == 6


class BusinessFailed(Exception):
    pass


def test_recorded_then_rolled_back_never_appears(database: str, names: DbNames) -> None:
    order = Order("c")

    def transaction(conn: psycopg.Connection[Any]) -> None:
        with UnitOfWork(conn, Outbox(names)) as uow:
            business(conn, names, "c")
            uow.track(order)
            order.pay(5)
            raise BusinessFailed

    with psycopg.connect(database) as conn, pytest.raises(BusinessFailed):
        transaction(conn)
    assert written(database, names) == ([], 0)
    assert order.version == 0 and order.pending_events == []


def test_a_failing_append_rolls_the_business_change_back(database: str, names: DbNames) -> None:

    def transaction(conn: psycopg.Connection[Any]) -> None:
        with UnitOfWork(conn, Outbox(names)) as uow:
            business(conn, names, "d")
            uow.publish(NewEvent("bad type", "d", "Created", {}))

    with psycopg.connect(database) as conn, pytest.raises(SchemaError, match="names the topic"):
        transaction(conn)
    assert written(database, names) == ([], 0)


def test_a_rolled_back_savepoint_takes_its_events_and_versions_with_it(
    database: str, names: DbNames
) -> None:
    order = Order("e")

    def undone_part(conn: psycopg.Connection[Any], uow: UnitOfWork) -> None:
        with uow.savepoint():
            business(conn, names, "e")
            order.pay(2)
            raise BusinessFailed

    with psycopg.connect(database) as conn, UnitOfWork(conn, Outbox(names)) as uow:
        uow.track(order)
        order.pay(1)
        with pytest.raises(BusinessFailed):
            undone_part(conn, uow)
        order.pay(3)
    events, orders = written(database, names)
    assert events == [("e", 1, "OrderPaid"), ("e", 2, "OrderPaid")]  # the undone one gone
    assert orders == 0


def test_a_failing_append_gives_the_aggregate_its_versions_back(
    database: str, names: DbNames
) -> None:
    """Audit 26, case 5: retrying the same aggregate after a failed append leaves no gap."""
    order = Order("g", version=7)

    def transaction(conn: psycopg.Connection[Any], bad: bool) -> None:
        with UnitOfWork(conn, Outbox(names)) as uow:
            uow.track(order)
            order.pay(1)
            if bad:
                uow.publish(NewEvent("bad type", "g", "Created", {}))

    with psycopg.connect(database) as conn:
        with pytest.raises(SchemaError):
            transaction(conn, bad=True)
        assert order.version == 7 and order.pending_events == []
        transaction(conn, bad=False)
    assert written(database, names) == ([("g", 8, "OrderPaid")], 0)
