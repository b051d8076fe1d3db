"""A handler that produces: its events go to the consumer's own outbox, on the record's
own connection and transaction, so they commit exactly when the inbox claim does.

Guarantee: an event emitted while handling a record exists if and only if that record's
effect committed; a redelivered copy of the record (a duplicate the inbox drops) emits
nothing again. Each emitted event carries the consumed event's trace id (unless it names
its own) and the consumed event's id as its causation id, so a chain of services can be
followed in the logs and in Kafka's headers.
"""

from __future__ import annotations

import dataclasses

from cdcbox.errors import UsageError
from cdcbox.event import Event
from cdcbox.producer.outbox import NewEvent
from cdcbox.seam.outbox import OutboxWriter
from cdcbox.telemetry.tracing import continuing


def caused_by(cause: Event, event: NewEvent) -> NewEvent:
    """`event` as emitted while handling `cause`: its causation id is `cause`'s event id,
    and it continues `cause`'s trace unless it names a trace of its own (with
    OpenTelemetry, as a child of the record's span when that span is in `cause`'s trace)."""
    return dataclasses.replace(
        event,
        causation_id=event.causation_id or cause.id_text,
        trace_id=event.trace_id or continuing(cause.trace_id),
    )


def require_outbox(outbox: OutboxWriter | None, handler_name: str) -> OutboxWriter:
    """The outbox a handler emits to, or `UsageError` when nothing bound one."""
    if outbox is None:
        raise UsageError(
            f"{handler_name}.emit() outside a consumer: set the handler's `outbox`, "
            "or run it in a Consumer or the testing Harness, which bind their own"
        )
    return outbox
