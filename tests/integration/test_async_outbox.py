"""The asyncio producer against real PostgreSQL: `AsyncOutbox` on a psycopg
AsyncConnection and `append_in_session` on SQLAlchemy's AsyncSession commit the event
with the business row or not at all, refuse an append outside a transaction, and send
nothing for an event that fails validation."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest
from psycopg import sql
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine

from cdcbox.errors import SchemaError, UsageError
from cdcbox.names import DbNames
from cdcbox.producer.async_outbox import AsyncOutbox, append_in_session
from cdcbox.producer.outbox import NewEvent
from tests.helpers import schema_with_orders

pytestmark = pytest.mark.integration


@pytest.fixture
def names(database: str) -> DbNames:
    return schema_with_orders(database, "async")


def committed(database: str, names: DbNames) -> tuple[list[str], int]:
    with psycopg.connect(database) as conn:
        events = conn.execute(
            sql.SQL("SELECT aggregate_id FROM {} ORDER BY id").format(names.table("outbox"))
        ).fetchall()
        orders = conn.execute(
            sql.SQL("SELECT count(*) FROM {}.orders").format(sql.Identifier(names.schema))
        ).fetchone()
    return [e[0] for e in events], int(orders[0]) if orders else 0


def test_async_append_commits_with_the_business_row_or_not_at_all(
    database: str, names: DbNames
) -> None:
    outbox = AsyncOutbox(names)
    orders = sql.SQL("INSERT INTO {}.orders VALUES (%s)").format(sql.Identifier(names.schema))

    async def scenario() -> None:
        async with await psycopg.AsyncConnection.connect(database, autocommit=True) as conn:
            async with conn.transaction():
                await conn.execute(orders, ("a",))
                await outbox.append(conn, NewEvent("order", "a", "Created", {"n": 1}))
            async with conn.transaction(force_rollback=True):
                await conn.execute(orders, ("b",))
                created, shipped = (NewEvent("order", "b", t, {}) for t in ("Created", "X"))
                await outbox.append_many(conn, [created, shipped])
            with pytest.raises(UsageError, match="outside a transaction"):
                await outbox.append(conn, NewEvent("order", "c", "Created", {}))
            async with conn.transaction():
                with pytest.raises(SchemaError, match="aggregate_type"):
                    await outbox.append(conn, NewEvent("bad type/x", "d", "Created", {}))

    asyncio.run(scenario())
    assert committed(database, names) == (["a"], 1)


def test_append_in_an_async_session_before_its_first_flush_commits_with_it(
    database: str, names: DbNames
) -> None:
    url = database.replace("postgresql://", "postgresql+psycopg://", 1)

    async def scenario() -> None:
        engine = create_async_engine(
            url, connect_args={"options": f"-c search_path={names.schema}"}
        )
        try:
            async with AsyncSession(engine) as session:
                # The first statement of the session: it begins the transaction.
                await append_in_session(
                    session, NewEvent("order", "s", "Created", {}), AsyncOutbox(names)
                )
                await session.execute(text("INSERT INTO orders VALUES ('s')"))
                await session.commit()
            async with AsyncSession(engine) as session:
                await append_in_session(
                    session, NewEvent("order", "t", "Created", {}), AsyncOutbox(names)
                )
                await session.rollback()
        finally:
            await engine.dispose()

    asyncio.run(scenario())
    events, orders = committed(database, names)
    assert (events, orders) == (["s"], 1)


def test_a_sync_connection_under_an_async_session_is_named(names: DbNames) -> None:
    class NotAsync:
        info: Any = None

    with pytest.raises(UsageError, match="not a NotAsync connection"):
        asyncio.run(_raw_of(NotAsync()))


async def _raw_of(raw: Any) -> None:
    class Adapted:
        driver_connection = raw

    class Connection:
        async def get_raw_connection(self) -> Adapted:
            return Adapted()

    class Session:
        async def connection(self) -> Connection:
            return Connection()

    from cdcbox.producer.async_outbox import session_connection

    await session_connection(Session())  # type: ignore[arg-type]
