"""Domain events recorded by business code, written to the outbox right before COMMIT.

Business code records events on its aggregates (`order.record("OrderPaid", {...})`) or
publishes them on the unit of work; `UnitOfWork` appends all of them, in recording
order, inside the same transaction just before it commits. If the append fails, the
business changes roll back with it; on rollback nothing is written. This is the
source article's BEFORE_COMMIT listener — never AFTER_COMMIT, which loses the events
of a process that dies between the commit and the write.

Aggregate versions come from the aggregate: it is loaded with its current version, and
each recorded event takes the next one.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar

import psycopg

from cdcbox.producer.outbox import NewEvent, Outbox

_recording_order = itertools.count()  # one sequence for every aggregate of the process


@dataclass
class _Recorded:
    seq: int
    event: NewEvent


class AggregateRoot:
    """Subclass and set `aggregate_type`; construct with the aggregate's id and the
    version it was loaded at (0 for a new aggregate)."""

    aggregate_type: ClassVar[str]

    def __init__(self, aggregate_id: str, version: int = 0) -> None:
        self.aggregate_id = aggregate_id
        self.version = version
        self._pending: list[_Recorded] = []

    def record(self, event_type: str, payload: Any, trace_id: str | None = None) -> NewEvent:
        """Record a domain event at the aggregate's next version; it is written to the
        outbox when the unit of work that tracks this aggregate commits."""
        self.version += 1
        event = NewEvent(
            self.aggregate_type,
            self.aggregate_id,
            event_type,
            payload,
            aggregate_version=self.version,
            trace_id=trace_id,
        )
        self._pending.append(_Recorded(next(_recording_order), event))
        return event

    @property
    def pending_events(self) -> list[NewEvent]:
        return [r.event for r in self._pending]


@dataclass
class RecordedEvents:
    """The events of one transaction: those of the tracked aggregates and those published
    directly, in recording order. An event taken for the append stays remembered until
    the transaction settles, so a rollback (of the transaction, of a savepoint, or of a
    failed append) gives each aggregate back exactly the versions its lost events took."""

    _aggregates: list[AggregateRoot] = field(default_factory=list)
    _published: list[_Recorded] = field(default_factory=list)
    _taken: list[tuple[AggregateRoot | None, _Recorded]] = field(default_factory=list)

    def track(self, *aggregates: AggregateRoot) -> None:
        for aggregate in aggregates:
            if all(aggregate is not known for known in self._aggregates):
                self._aggregates.append(aggregate)

    def publish(self, event: NewEvent) -> None:
        self._published.append(_Recorded(next(_recording_order), event))

    def take(self) -> list[NewEvent]:
        """Every pending event in recording order, to be appended now; no longer pending,
        but given back by `discard` until `settled`."""
        pending: list[tuple[AggregateRoot | None, _Recorded]] = [
            *((None, r) for r in self._published),
            *((a, r) for a in self._aggregates for r in a._pending),
        ]
        pending.sort(key=lambda item: item[1].seq)
        self._taken += pending
        self._published.clear()
        for aggregate in self._aggregates:
            aggregate._pending.clear()
        return [r.event for _, r in pending]

    def settled(self) -> None:
        """The transaction committed: what was taken is written for good."""
        self._taken.clear()

    @staticmethod
    def mark() -> int:
        """A point in the recording order, for `discard`."""
        return next(_recording_order)

    def discard(self, after: int = -1) -> None:
        """Forget what was recorded after `mark` (everything by default), taken or not,
        giving the aggregates back the versions those events took."""
        self._published = [r for r in self._published if r.seq <= after]
        for aggregate in self._aggregates:
            dropped = [r for r in aggregate._pending if r.seq > after]
            aggregate._pending = [r for r in aggregate._pending if r.seq <= after]
            aggregate.version -= len(dropped)
        for owner, recorded in self._taken:
            if owner is not None and recorded.seq > after:
                owner.version -= 1
        self._taken = [(a, r) for a, r in self._taken if r.seq <= after]


class UnitOfWork:
    """One transaction of `conn` whose recorded events are appended before it commits.

    ``with UnitOfWork(conn) as uow:`` begins the transaction (a savepoint inside an
    open one); business statements run on `conn`; aggregates are `track`ed (or events
    `publish`ed); leaving the block appends every pending event in recording order,
    then commits. An exception anywhere, the append included, rolls back everything.
    """

    def __init__(self, conn: psycopg.Connection[Any], outbox: Outbox | None = None) -> None:
        self.conn = conn
        self.outbox = outbox or Outbox()
        self.events = RecordedEvents()
        self.track = self.events.track
        self.publish = self.events.publish
        self._transaction: Any = None

    def __enter__(self) -> UnitOfWork:
        self._transaction = self.conn.transaction()
        self._transaction.__enter__()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: Any
    ) -> bool:
        if kind is None:
            try:
                self.flush()
            except BaseException as failed:  # the append failed: roll the business back
                self.events.discard()
                self._transaction.__exit__(type(failed), failed, failed.__traceback__)
                raise
        else:
            self.events.discard()
        try:
            return bool(self._transaction.__exit__(kind, error, tb))
        except BaseException:
            self.events.discard()  # COMMIT itself failed: nothing was written
            raise
        finally:
            self.events.settled()

    def flush(self) -> None:
        """Append every pending event now (still inside the transaction), in recording
        order; `__exit__` calls it right before COMMIT."""
        pending = self.events.take()
        if pending:
            self.outbox.append_many(self.conn, pending)

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """A nested transaction: if it rolls back, so do the events recorded inside it
        (and the aggregates' versions they took)."""
        mark = self.events.mark()
        with self.conn.transaction():
            try:
                yield
            except BaseException:
                self.events.discard(after=mark)
                raise
