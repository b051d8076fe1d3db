"""Where a handler's `emit` appends: the outbox of the consumer's own database, on the
record's own session, so an emitted event commits exactly when the record's effect does.
`cdcbox.producer.Outbox` (PostgreSQL) and MariaDB's outbox (`cdcbox.mariadb.outbox`) both
satisfy `OutboxWriter`.
"""

from __future__ import annotations

import uuid
from typing import Protocol

from cdcbox.producer.outbox import NewEvent
from cdcbox.session import AsyncSession, Session


class OutboxWriter(Protocol):
    """An outbox a handler emits to. Each method refuses, with `UsageError`, a session of
    another database than the outbox's."""

    def emit(self, conn: Session, event: NewEvent) -> uuid.UUID:
        """Append `event` in `conn`'s open transaction; its event id."""
        ...

    async def emit_async(self, conn: AsyncSession, event: NewEvent) -> uuid.UUID:
        """`emit` on the asynchronous view of the record's session."""
        ...
