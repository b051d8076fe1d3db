"""The outbox with SQLAlchemy 2.x sessions on the psycopg dialect (`postgresql+psycopg`).

`append(session, event)` writes in the session's transaction, beginning it if the session
has not yet (a session is idle until its first statement). `SessionEvents(session)`
collects domain events and appends them in the session's `before_commit`, so they
commit with the flushed business rows or not at all; a rollback forgets them.
Needs the `cdcbox[sqlalchemy]` extra.
"""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus
from sqlalchemy import event as sa_event
from sqlalchemy.orm import Session, SessionTransaction

from cdcbox.errors import UsageError
from cdcbox.producer.outbox import NewEvent, Outbox
from cdcbox.producer.unit_of_work import AggregateRoot, RecordedEvents


def psycopg_connection(session: Session) -> psycopg.Connection[Any]:
    """The psycopg connection under `session`'s transaction (begun if need be)."""
    raw = session.connection().connection.driver_connection
    if not isinstance(raw, psycopg.Connection):
        raise UsageError(
            "cdcbox needs SQLAlchemy's psycopg 3 dialect (postgresql+psycopg://...), "
            f"not a {type(raw).__name__} connection"
        )
    if raw.info.transaction_status == TransactionStatus.IDLE:
        # The session has begun, but psycopg opens the database transaction with its
        # first statement; open it now, so the append is inside the session's.
        raw.execute("SELECT 1")
    return raw


def append(session: Session, event: NewEvent, outbox: Outbox | None = None) -> uuid.UUID:
    """Append `event` in the session's transaction; returns its event id."""
    return (outbox or Outbox()).append(psycopg_connection(session), event)


class SessionEvents:
    """Domain events of one session, appended right before each of its commits.

    A rollback forgets the events recorded in what it rolled back, and gives their
    aggregates back the versions they took: all of them for the session's transaction
    (a failed append included), only those recorded inside it for a SAVEPOINT
    (`begin_nested`).
    """

    def __init__(self, session: Session, outbox: Outbox | None = None) -> None:
        self.session = session
        self.outbox = outbox or Outbox()
        self.events = RecordedEvents()
        # Where each open SAVEPOINT began in the recording order; one already open when
        # this object was made began, for its events, here.
        self._savepoints: dict[int, int] = {}
        self._made_at = self.events.mark()
        sa_event.listen(session, "before_commit", self._before_commit)
        sa_event.listen(session, "after_commit", self._after_commit)
        sa_event.listen(session, "after_transaction_create", self._after_transaction_create)
        sa_event.listen(session, "after_soft_rollback", self._after_soft_rollback)

    def track(self, *aggregates: AggregateRoot) -> None:
        self.events.track(*aggregates)

    def publish(self, event: NewEvent) -> None:
        self.events.publish(event)

    def _before_commit(self, session: Session) -> None:
        session.flush()  # the business rows first, as a commit would
        pending = self.events.take()
        if pending:
            self.outbox.append_many(psycopg_connection(session), pending)

    def _after_commit(self, session: Session) -> None:
        self.events.settled()

    def _after_transaction_create(self, session: Session, transaction: SessionTransaction) -> None:
        if transaction.nested:
            self._savepoints[id(transaction)] = self.events.mark()

    def _after_soft_rollback(self, session: Session, previous: SessionTransaction) -> None:
        if previous.nested:
            self.events.discard(after=self._savepoints.pop(id(previous), self._made_at))
        else:
            self.events.discard()
