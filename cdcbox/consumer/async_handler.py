"""Async handlers: `async def handle(event, conn)` with a psycopg `AsyncConnection` (on
MariaDB an `AsyncMariaDbSession`, `cdcbox.mariadb.async_session`).

Guarantee: the same protocol as a sync handler. The `AsyncConnection` an async handler
gets is a second view of the record's own database session: it wraps the libpq
connection of the consumer's sync connection, inside the transaction the consumer
opened. So the handler's statements commit or roll back with the inbox claim, the
version guard and the outcome mark, exactly as a sync handler's do; `async with
conn.transaction()` in a handler is a savepoint, as it is in a sync one.

The coroutines run on one event loop of the process, in a thread of its own that lives
as long as the process: clients a handler binds to its loop (an HTTP session, a pool)
stay usable from one record to the next, and a consumer started from a thread that
already runs a loop (an asyncio application, an async test) is not refused. The
consumer waits for each coroutine before it commits: records are still applied one
transaction at a time, in partition order.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
import uuid
import weakref
from collections.abc import Coroutine, Sequence
from typing import Any, ClassVar, TypeVar, cast

import psycopg

from cdcbox.consumer.emit import caused_by, mismatched, require_outbox
from cdcbox.consumer.handler import BaseHandler
from cdcbox.errors import UsageError
from cdcbox.event import Event
from cdcbox.mariadb.async_session import AsyncMariaDbSession
from cdcbox.mariadb.outbox import MariaDbOutbox
from cdcbox.mariadb.session import MariaDbSession
from cdcbox.producer.outbox import NewEvent, Outbox, slot_refusal
from cdcbox.session import AsyncSession, Session
from cdcbox.telemetry.tracing import in_current_context

T = TypeVar("T")
# How long a handler's coroutine may take to finish its cancellation when the consumer's
# thread is interrupted (it must not touch the session the consumer then rolls back).
_CANCEL_WAIT_S = 10.0


class AsyncHandler(BaseHandler):
    """Subclass like `Handler` (its sibling), with `async def handle(self, event, conn)`;
    `conn` is a `psycopg.AsyncConnection` in the record's transaction (never commit it
    yourself)."""

    # psycopg's pipeline mode belongs to the sync connection; an async view cannot join it.
    pipelined: ClassVar[bool] = False

    async def handle(self, event: Event, conn: psycopg.AsyncConnection[Any]) -> None:
        """Apply `event` with `conn`, in the record's transaction, as `Handler.handle`."""
        raise NotImplementedError

    async def handle_batch(
        self, events: Sequence[Event], conn: psycopg.AsyncConnection[Any]
    ) -> None:
        """Batch mode, as `Handler.handle_batch`: override to write in fewer statements."""
        for event in events:
            await self.handle(event, conn)

    async def emit(self, conn: AsyncSession, cause: Event, event: NewEvent) -> uuid.UUID:
        """`Handler.emit`, awaited, on the connection `handle` got."""
        name = type(self).__name__
        outbox = require_outbox(self.outbox, name)
        if isinstance(conn, AsyncMariaDbSession):  # its outbox table, on the same session
            if not isinstance(outbox, MariaDbOutbox):
                raise mismatched(name, outbox, "MariaDB")
            return outbox.append(conn.session, caused_by(cause, event))
        if not isinstance(outbox, Outbox) or not isinstance(conn, psycopg.AsyncConnection):
            raise mismatched(name, outbox, "PostgreSQL")
        prepared = outbox.one(conn, caused_by(cause, event))
        with slot_refusal(outbox.messages):
            await conn.execute(prepared.statement, prepared.params)
        return prepared.event_ids[0]

    def invoke(self, event: Event, conn: Session) -> None:
        run_on_loop(in_current_context(self.handle(event, _declared(async_view(conn)))))

    def invoke_batch(self, events: Sequence[Event], conn: Session) -> None:
        run_on_loop(in_current_context(self.handle_batch(events, _declared(async_view(conn)))))


def _declared(view: AsyncSession) -> psycopg.AsyncConnection[Any]:
    """`handle` is declared for psycopg, the common case; on MariaDB the view has the same
    surface (`execute`, `cursor`, `transaction()`): a handler meant for both annotates
    its `conn` as `cdcbox.AsyncSession`."""
    return cast("psycopg.AsyncConnection[Any]", view)


class _Loop:
    """The process's event loop for handlers, started on first use."""

    _lock = threading.Lock()
    _loop: asyncio.AbstractEventLoop | None = None

    @classmethod
    def get(cls) -> asyncio.AbstractEventLoop:
        with cls._lock:
            if cls._loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(
                    target=loop.run_forever, name="cdcbox-async-handlers", daemon=True
                ).start()
                cls._loop = loop
            return cls._loop


def run_on_loop(coroutine: Coroutine[Any, Any, T]) -> T:
    """Run `coroutine` on the handlers' loop and wait for it; its exception is raised
    here. If this thread is interrupted while waiting, the coroutine is cancelled and
    waited for, so it never runs on beside the consumer's rollback."""
    future = asyncio.run_coroutine_threadsafe(coroutine, _Loop.get())
    try:
        return future.result()
    except BaseException:
        future.cancel()
        concurrent.futures.wait([future], timeout=_CANCEL_WAIT_S)
        raise


_views: weakref.WeakKeyDictionary[psycopg.Connection[Any], psycopg.AsyncConnection[Any]] = (
    weakref.WeakKeyDictionary()
)
_views_lock = threading.Lock()


def async_view(conn: Session) -> AsyncSession:
    """The `AsyncConnection` over `conn`'s own libpq connection (one per connection).

    It never prepares statements (the two objects would name them alike), and `conn`
    keeps its notice and notification handlers. It is closed when `conn` is: never
    close it, commit it or roll it back yourself. On MariaDB: an `AsyncMariaDbSession`
    over the record's session.
    """
    if isinstance(conn, MariaDbSession):
        return AsyncMariaDbSession(conn)
    if not isinstance(conn, psycopg.Connection):
        raise UsageError(f"an AsyncHandler cannot run on a {type(conn).__name__}")
    with _views_lock:
        view = _views.get(conn)
        if view is None:
            pgconn = conn.pgconn
            notice, notify = pgconn.notice_handler, pgconn.notify_handler
            view = psycopg.AsyncConnection(pgconn)
            pgconn.notice_handler, pgconn.notify_handler = notice, notify
            view.prepare_threshold = None
            _views[conn] = view
        return view
