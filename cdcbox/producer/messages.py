"""The outbox without a table: events as transactional logical decoding messages.

`pg_logical_emit_message(true, prefix, content)` writes an event into the WAL inside the
caller's transaction (it commits with it, and is gone with a rollback); the connector of
`connectors/messages/` decodes it (Debezium's `DecodeLogicalDecodingMessageContent`) and
routes it through the same Outbox Event Router as a table row, to the same record.

The content is one JSON object, ASCII only (Debezium reads it with the JVM's default
charset): the outbox columns as the table holds them, `occurred_at` stamped by the
database (the emitting function, `migrate.emit_function_sql`), and the payload as a
JSON string of its bytes read as ISO-8859-1, one character per byte; the connector's
value converter writes that string back in ISO-8859-1, so the record's value is the
payload's bytes exactly, JSON text or Avro alike. The emitting function refuses,
failing the caller's transaction, while the connector's slot is missing or
invalidated: no snapshot could recover a message emitted then.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from psycopg import sql

from cdcbox.names import DbNames
from cdcbox.producer.columns import EVENT_COLUMNS

_AGGREGATE_TYPE = EVENT_COLUMNS.index("aggregate_type")

# What the connector's value converter must encode with (`value.converter.converter.encoding`).
PAYLOAD_CHARSET = "iso-8859-1"


def message_body(columns: Sequence[Any]) -> bytes:
    """An event's columns (`EVENT_COLUMNS` order, as `EventRow.params` gives them) as the
    rest of a JSON object, after the `{"occurred_at":"…",` the database prepends: the
    columns by name, ASCII only, compact."""
    fields = dict(zip(EVENT_COLUMNS, columns, strict=True))
    fields["event_id"] = str(fields["event_id"])
    fields["payload"] = fields["payload"].decode(PAYLOAD_CHARSET)
    text = json.dumps(fields, ensure_ascii=True, separators=(",", ":"))
    return text[1:].encode("ascii")  # without its "{": the database writes it


def emit_statement(names: DbNames) -> sql.Composed:
    """The one statement of an append, any number of events: the function `cdc-ctl db
    migrate --relay messages` created (`migrate.emit_function_sql`)."""
    return sql.SQL("SELECT {}(%s::text[], %s::bytea[])").format(names.emit_function)


def emit_params(rows: Sequence[Sequence[Any]]) -> tuple[list[str], list[bytes]]:
    """The parameters of `emit_statement` for events' columns (`EventRow.params`)."""
    return [r[_AGGREGATE_TYPE] for r in rows], [message_body(r) for r in rows]
