"""Appending events to a MariaDB service's outbox inside the caller's transaction.

The same checks and encoding as the PostgreSQL outbox (`cdcbox.producer.outbox.event_row`:
everything is checked before the first byte is written), the same columns, so the polling
relay publishes the same records. The producer never begins or commits: a connection in
autocommit mode is refused, since the event would commit without the business change.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from cdcbox.errors import UsageError
from cdcbox.limits import EventLimits
from cdcbox.mariadb.async_session import AsyncMariaDbSession
from cdcbox.mariadb.session import MariaDbSession
from cdcbox.names import DbNames
from cdcbox.producer.columns import EVENT_COLUMNS
from cdcbox.producer.outbox import EventRow, NewEvent, event_row, wrong_session
from cdcbox.session import AsyncSession, Session

if TYPE_CHECKING:
    from cdcbox.avro import Catalogue

# created_at and occurred_at from one clock reading: UTC_TIMESTAMP(6) is the statement's
# start time wherever it appears in it.
ISO_FORMAT = "%Y-%m-%dT%H:%i:%s.%fZ"


class MariaDbOutbox:
    """Appends events to one MariaDB outbox, in the caller's transaction; construct once,
    share freely (holds no connection)."""

    def __init__(
        self,
        names: DbNames = DbNames(),
        schemas: Catalogue | None = None,
        limits: EventLimits = EventLimits(),
    ) -> None:
        self.names = names
        self.schemas = schemas
        self.limits = limits
        columns = ", ".join(EVENT_COLUMNS)
        values = ", ".join(["%s"] * len(EVENT_COLUMNS))
        # `%%` survives PyMySQL's parameter formatting as one `%`.
        stamp = "UTC_TIMESTAMP(6), DATE_FORMAT(UTC_TIMESTAMP(6), '{}')".format(
            ISO_FORMAT.replace("%", "%%")
        )
        self._head = f"INSERT INTO {names.outbox} ({columns}, created_at, occurred_at) VALUES "
        self._row = f"({values}, {stamp})"

    def append(self, conn: Any, event: NewEvent) -> uuid.UUID:
        """Append one event in the open transaction of `conn` (PyMySQL); returns its id."""
        row = event_row(event, self.schemas, self.limits)
        _require_transaction(conn)
        with conn.cursor() as cur:
            cur.execute(self._head + self._row, _params(row))
        return row.event_id

    def emit(self, conn: Session, event: NewEvent) -> uuid.UUID:
        """`append` on a consumer's record session (`cdcbox.seam.outbox.OutboxWriter`):
        `UsageError` unless it is MariaDB's."""
        if not isinstance(conn, MariaDbSession):
            raise wrong_session(self, conn)
        return self.append(conn, event)

    async def emit_async(self, conn: AsyncSession, event: NewEvent) -> uuid.UUID:
        """`emit` on the asynchronous view of the record's session (the same session)."""
        if not isinstance(conn, AsyncMariaDbSession):
            raise wrong_session(self, conn)
        return self.append(conn.session, event)

    def append_many(self, conn: Any, events: Iterable[NewEvent]) -> list[uuid.UUID]:
        """Append many events with one multi-row INSERT (one round trip, one instant)."""
        rows = [event_row(e, self.schemas, self.limits) for e in events]
        if not rows:
            return []
        _require_transaction(conn)
        with conn.cursor() as cur:
            cur.execute(
                self._head + ", ".join([self._row] * len(rows)),
                [value for r in rows for value in _params(r)],
            )
        return [r.event_id for r in rows]


def _params(row: EventRow) -> tuple[Any, ...]:
    return tuple(str(v) if isinstance(v, uuid.UUID) else v for v in row.params())


def _require_transaction(conn: Any) -> None:
    if conn.get_autocommit():
        raise UsageError(
            "outbox append on a connection in autocommit mode: the event must commit with "
            "your business change, so append it in the transaction of that change "
            "(autocommit off, then `conn.commit()`)"
        )
