"""An async handler's view of the consumer's PostgreSQL session: psycopg's
`AsyncConnection` over the same libpq connection, inside the record's transaction."""

from __future__ import annotations

import threading
import weakref
from typing import Any

import psycopg

from cdcbox.errors import UsageError
from cdcbox.session import AsyncSession, Session

_views: weakref.WeakKeyDictionary[psycopg.Connection[Any], psycopg.AsyncConnection[Any]] = (
    weakref.WeakKeyDictionary()
)
_views_lock = threading.Lock()


def async_view(conn: Session) -> AsyncSession:
    """The `AsyncConnection` over `conn`'s own libpq connection (one per connection).

    It never prepares statements (the two objects would name them alike), and `conn`
    keeps its notice and notification handlers. It is closed when `conn` is: never
    close it, commit it or roll it back yourself.
    """
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
