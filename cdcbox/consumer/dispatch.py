"""Handlers are registered, validated and bound to the consumer's outbox at start-up: a
missing topic, a duplicate consumer name or an empty set of event types fails before the
first record, not at it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from cdcbox import wire
from cdcbox.consumer.async_handler import AsyncHandler
from cdcbox.consumer.handler import BaseHandler
from cdcbox.errors import ConfigError
from cdcbox.seam.outbox import OutboxWriter
from cdcbox.session import AsyncSession, Session

_CONSUMER_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,200}")


def dispatch_table(handlers: Sequence[BaseHandler]) -> dict[str, tuple[BaseHandler, ...]]:
    """event_type → the handlers taking it (each its own consumer name, so its own inbox
    key), refusing what would be ambiguous or silently dead."""
    if not handlers:
        raise ConfigError("a consumer needs at least one handler")
    names: set[str] = set()
    table: dict[str, tuple[BaseHandler, ...]] = {}
    for handler in handlers:
        cls = type(handler)
        name = getattr(handler, "consumer_name", None)
        if not isinstance(name, str) or not _CONSUMER_NAME.fullmatch(name):
            raise ConfigError(
                f"{cls.__name__}.consumer_name must be set to a stable name "
                "(letters, digits, '_.:-'); it is half of the inbox key"
            )
        if name in names:
            raise ConfigError(f"consumer name {name!r} is used by two handlers")
        names.add(name)
        if not handler.subscribed_topics():
            raise ConfigError(f"{cls.__name__} declares neither aggregate_types nor topics")
        if isinstance(handler, AsyncHandler) and handler.pipelined:
            raise ConfigError(f"{cls.__name__}: an AsyncHandler cannot be pipelined")
        event_types = getattr(handler, "event_types", None)
        if not event_types:
            raise ConfigError(
                f"{cls.__name__}.event_types is empty: name the types it takes, "
                f"{{{wire.ANY_EVENT_TYPE!r}}} for every event of its topics, and for a "
                "producer that sends no type, wire_format = WireFormat(default_event_type=...)"
            )
        for event_type in event_types:
            table[event_type] = (*table.get(event_type, ()), handler)
    return table


def bind_handlers(
    handlers: Sequence[BaseHandler],
    outbox: OutboxWriter,
    async_view: Callable[[Session], AsyncSession],
) -> None:
    """Give each handler that names no outbox the consumer's own for `Handler.emit` (its
    database's, in its schema, with its Avro catalogue, so emitted Avro event types are
    encoded and checked), and each `AsyncHandler` the asynchronous view of the
    database's sessions."""
    for handler in handlers:
        if handler.outbox is None:
            handler.outbox = outbox
        if isinstance(handler, AsyncHandler):
            handler.session_view = async_view
