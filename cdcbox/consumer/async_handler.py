"""Async handlers: `async def handle(event, conn)` with a psycopg `AsyncConnection` (on
MariaDB the asynchronous session of `cdcbox.mariadb.async_session`).

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
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, ClassVar, TypeVar, cast

import psycopg

from cdcbox.consumer.emit import caused_by, require_outbox
from cdcbox.consumer.handler import BaseHandler
from cdcbox.errors import UsageError
from cdcbox.event import Event
from cdcbox.producer.outbox import NewEvent
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
    # The asynchronous view of the consumer's record session (its database's), bound by
    # the consumer at start.
    session_view: Callable[[Session], AsyncSession] | None = None

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
        outbox = require_outbox(self.outbox, type(self).__name__)
        return await outbox.emit_async(conn, caused_by(cause, event))

    def invoke(self, event: Event, conn: Session) -> None:
        view = _declared(self._view(conn))
        run_on_loop(in_current_context(self.handle(event, view)))

    def invoke_batch(self, events: Sequence[Event], conn: Session) -> None:
        view = _declared(self._view(conn))
        run_on_loop(in_current_context(self.handle_batch(events, view)))

    def _view(self, conn: Session) -> AsyncSession:
        if self.session_view is None:
            raise UsageError(
                f"{type(self).__name__} invoked outside a consumer: run it in a Consumer "
                "or the testing Harness, which give it its database's sessions"
            )
        return self.session_view(conn)


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
