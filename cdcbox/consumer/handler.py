"""The class users subclass: a stable consumer name, what it consumes, `handle()`.

`Handler` (a psycopg `Connection`) and `AsyncHandler` (`cdcbox.consumer.async_handler`,
an `AsyncConnection`) are siblings over `BaseHandler`, which holds what both declare and
how the consumer calls them (`invoke`, `invoke_batch`); the consumer knows only that.

The consumer name is half of the inbox key: renaming it makes every event new again, so
it is declared explicitly and never derived from the class name.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, cast

import psycopg

from cdcbox import wire
from cdcbox.consumer.emit import caused_by, require_outbox
from cdcbox.consumer.signals import SkipEvent
from cdcbox.event import Event
from cdcbox.producer.outbox import NewEvent
from cdcbox.seam.outbox import OutboxWriter
from cdcbox.session import Session


class BaseHandler:
    """What every handler declares, and how the consumer calls it. Subclass `Handler` or
    `AsyncHandler`, not this."""

    # Half of the inbox key: set it on the class (an instance may set its own).
    consumer_name: str
    event_types: ClassVar[frozenset[str] | set[str] | tuple[str, ...]]
    aggregate_types: ClassVar[tuple[str, ...]] = ()
    topics: ClassVar[tuple[str, ...]] = ()
    # Avro events are decoded into this catalogue version's schema (None: the newest).
    schema_version: ClassVar[int | None] = None
    # Event type → a dataclass or pydantic model: `handle` gets an instance as
    # `event.payload`, validated; a payload that does not fit is dead-lettered.
    payload_types: ClassVar[Mapping[str, type]] = {}
    # Whether the consumer sends this handler's statements in a pipeline (psycopg's
    # pipeline mode) instead of waiting for each one's result. None, the default: yes,
    # and a record that fails pipelined in the database is redone at once without it
    # (batch mode: the batch, record by record); a handler that fails only pipelined
    # (COPY, server-side cursors, several statements in one string) is not pipelined
    # again. True: pipelined, no redo. False: never. Reading a result or
    # `cursor.rowcount` waits for it, so a handler's logic is the same either way; what
    # changes is where a failed statement whose result is not read raises: at the end
    # of the record's (or batch's) transaction.
    pipelined: ClassVar[bool | None] = None
    # Where `emit` appends. None: the consumer binds its own database's outbox at start.
    outbox: OutboxWriter | None = None
    # Where its producer's records carry each part of an event. The default reads cdcbox's
    # contract and Debezium's Outbox Event Router as documented; see `wire.WireFormat`.
    wire_format: ClassVar[wire.WireFormat] = wire.DEFAULT_FORMAT

    def invoke(self, event: Event, conn: Session) -> None:
        """How the consumer applies one event on its session, in the record's
        transaction."""
        raise NotImplementedError

    def invoke_batch(self, events: Sequence[Event], conn: Session) -> None:
        """How the consumer applies a batch's events, in the batch's transaction."""
        raise NotImplementedError

    @classmethod
    def subscribed_topics(cls) -> tuple[str, ...]:
        return tuple(cls.topics) + tuple(cls.wire_format.topic(a) for a in cls.aggregate_types)

    def takes(self, event_type: str) -> bool:
        """Whether this handler applies events of `event_type` ("" : untyped)."""
        return event_type in self.event_types or wire.ANY_EVENT_TYPE in self.event_types


class Handler(BaseHandler):
    """Subclass and set `consumer_name`, `aggregate_types` (or `topics`) and `event_types`.

    `handle` runs inside the consumer's transaction on `conn`: write your change with it,
    never commit or roll back yourself. Raise any exception to have the record retried.
    `conn` is a psycopg `Connection` on PostgreSQL and MariaDB's session on MariaDB
    (`execute`, `cursor`, `transaction()` alike, `%s` placeholders): a handler meant for
    both annotates it `cdcbox.Session` and writes SQL both accept.
    `event_types = {ANY_EVENT_TYPE}` takes every event of its topics, typed or not.
    """

    def handle(self, event: Event, conn: psycopg.Connection[Any]) -> None:
        """Apply `event` with `conn`, in the record's transaction: the change commits
        with the inbox claim and the outcome mark, or not at all."""
        raise NotImplementedError

    def handle_batch(self, events: Sequence[Event], conn: psycopg.Connection[Any]) -> None:
        """Batch mode: the poll batch's new events for this handler, in partition order,
        duplicates and stale versions already removed, in the batch's one transaction.
        Override to write them in fewer statements (`cursor.executemany`). Any exception
        (a signal included) redoes the batch record by record through `handle`."""
        for event in events:
            self.handle(event, conn)

    def emit(self, conn: Session, cause: Event, event: NewEvent) -> uuid.UUID:
        """Append `event` to this service's outbox in the record's transaction (`conn` is
        the one `handle` got: no second connection). It commits with the record's effect
        or not at all, carries `cause`'s trace id and `cause`'s event id as its causation
        id. Works in every mode, pipelined and batch included. Returns its event id."""
        outbox = require_outbox(self.outbox, type(self).__name__)
        return outbox.emit(conn, caused_by(cause, event))

    def invoke(self, event: Event, conn: Session) -> None:
        """How the consumer calls `handle` (an `AsyncHandler` runs it on its loop)."""
        # `handle` is declared for psycopg, the common case; on MariaDB the session has
        # the same surface (see the class docstring).
        self.handle(event, cast("psycopg.Connection[Any]", conn))

    def invoke_batch(self, events: Sequence[Event], conn: Session) -> None:
        """How the consumer calls `handle_batch`."""
        self.handle_batch(events, cast("psycopg.Connection[Any]", conn))


class NoHandler(BaseHandler):
    """Stands in for a consumer that has no handler for an event of its topic, where the
    event must still go the handled way (its aggregate is parked for that consumer, or it
    is a copy replayed for it): the consumer records it as skipped, its version consumed
    in order, and the park released when it was the last held event."""

    event_types = frozenset()

    def __init__(self, consumer_name: str, event_type: str) -> None:
        self.consumer_name = consumer_name
        self.reason = f"no handler of {consumer_name} takes event type {event_type!r}"

    def invoke(self, event: Event, conn: Session) -> None:
        raise SkipEvent(self.reason)

    def invoke_batch(self, events: Sequence[Event], conn: Session) -> None:
        raise SkipEvent(self.reason)
