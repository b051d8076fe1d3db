"""The outbox for asyncio services (FastAPI and the like): `psycopg.AsyncConnection`,
and SQLAlchemy's `AsyncSession` on the psycopg dialect (`cdcbox[sqlalchemy]`).

The same statement, the same validation and the same transaction check as
`cdcbox.producer.outbox.Outbox`, awaited: one INSERT, one round trip (none of its own inside a
pipeline), and nothing is sent when the event or the transaction is wrong.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg.pq import TransactionStatus

from cdcbox.errors import UsageError
from cdcbox.limits import EventLimits
from cdcbox.names import DbNames
from cdcbox.producer.outbox import NewEvent, Outbox, slot_refusal

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncSession

    from cdcbox.avro import Catalogue  # Avro (fastavro) only for those who load one


class AsyncOutbox:
    """Appends events in the caller's open transaction of an `AsyncConnection`."""

    def __init__(
        self,
        names: DbNames = DbNames(),
        schemas: Catalogue | None = None,
        limits: EventLimits = EventLimits(),
        messages: bool = False,
    ) -> None:
        self.outbox = Outbox(names, schemas, limits, messages)

    async def append(self, conn: psycopg.AsyncConnection[Any], event: NewEvent) -> uuid.UUID:
        prepared = self.outbox.one(conn, event)
        with slot_refusal(self.outbox.messages):
            await conn.execute(prepared.statement, prepared.params)
        return prepared.event_ids[0]

    async def append_many(
        self, conn: psycopg.AsyncConnection[Any], events: Iterable[NewEvent]
    ) -> list[uuid.UUID]:
        prepared = self.outbox.many(conn, events)
        if prepared.event_ids:
            with slot_refusal(self.outbox.messages):
                await conn.execute(prepared.statement, prepared.params)
        return prepared.event_ids


async def session_connection(session: AsyncSession) -> psycopg.AsyncConnection[Any]:
    """The psycopg connection under `session`'s transaction (begun if need be)."""
    connection = await session.connection()
    raw = (await connection.get_raw_connection()).driver_connection
    if not isinstance(raw, psycopg.AsyncConnection):
        raise UsageError(
            "cdcbox needs SQLAlchemy's psycopg 3 dialect (postgresql+psycopg://...) with "
            f"an async engine, not a {type(raw).__name__} connection"
        )
    if raw.info.transaction_status == TransactionStatus.IDLE:
        # As in cdcbox.producer.sqlalchemy: the session has begun, psycopg's transaction not yet.
        await raw.execute("SELECT 1")
    return raw


async def append_in_session(
    session: AsyncSession, event: NewEvent, outbox: AsyncOutbox | None = None
) -> uuid.UUID:
    """Append `event` in the `AsyncSession`'s transaction; returns its event id."""
    return await (outbox or AsyncOutbox()).append(await session_connection(session), event)
