"""Appending events to the outbox inside the caller's transaction.

The producer never begins or commits: the event must commit or roll back with the
business change, so appending outside an open transaction is refused. One append is one
INSERT; inside `conn.pipeline()` it adds no round trip of its own. Everything is checked
before the first byte is written.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql
from psycopg.pq import TransactionStatus

from cdcbox.errors import SchemaError, SlotUnavailable, UsageError
from cdcbox.event import MAX_VERSION
from cdcbox.ids import uuid7
from cdcbox.limits import AGGREGATE_TYPE, FIELD_MAX_BYTES, EventLimits
from cdcbox.names import DbNames
from cdcbox.producer.columns import EVENT_COLUMNS
from cdcbox.producer.messages import emit_params, emit_statement
from cdcbox.session import AsyncSession, Session
from cdcbox.telemetry.tracing import current_traceparent
from cdcbox.wire import CONTENT_TYPE_JSON, DLQ_SUFFIX

if TYPE_CHECKING:
    from cdcbox.avro import Catalogue  # Avro (fastavro) only for those who load one

_TYPES = ("uuid", "text", "text", "bigint", "text", "bytea", "text", "text", "text")
ISO_FORMAT = 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'
# What the transaction check reads: a psycopg Connection or AsyncConnection.
ConnectionInfoSource = psycopg.Connection[Any] | psycopg.AsyncConnection[Any]


@dataclass(frozen=True)
class NewEvent:
    """An event to append. `payload` is JSON-serialisable data, or already-encoded bytes
    together with their `content_type`. Versions start at 1; None (stored as 0) means
    unversioned, and such events bypass the consumers' version guard. `causation_id`:
    the id of the event whose handling caused this one (`Handler.emit` sets it).
    `trace_id` None: the active OpenTelemetry span's traceparent, when there is one; ""
    none."""

    aggregate_type: str
    aggregate_id: str
    event_type: str
    payload: Any
    aggregate_version: int | None = None
    event_id: uuid.UUID | None = None
    trace_id: str | None = None
    content_type: str = CONTENT_TYPE_JSON
    causation_id: str | None = None


def encode_json(payload: Any, what: str) -> bytes:
    try:
        return json.dumps(
            payload, separators=(",", ":"), ensure_ascii=False, allow_nan=False
        ).encode()
    except (TypeError, ValueError) as e:
        raise SchemaError(f"{what}: payload is not JSON-serialisable: {e}") from e


@dataclass(frozen=True)
class EventRow:
    """An event's outbox columns (`EVENT_COLUMNS`), validated and encoded."""

    event_id: uuid.UUID
    aggregate_type: str
    aggregate_id: str
    aggregate_version: int  # 0: unversioned
    event_type: str
    payload: bytes
    content_type: str
    trace_id: str  # "": none
    causation_id: str  # "": none

    def params(self) -> tuple[Any, ...]:
        """The values in `EVENT_COLUMNS` order, as the INSERT takes them."""
        return tuple(getattr(self, column) for column in EVENT_COLUMNS)


def check_json(payload: bytes, what: str) -> None:
    """Bytes declared JSON must decode as consumers decode them, or none of them could."""
    try:
        json.loads(payload)
    except (ValueError, RecursionError) as e:  # RecursionError: nested too deep
        raise SchemaError(f"{what}: payload declared {CONTENT_TYPE_JSON} is not JSON: {e}") from e


def event_row(
    event: NewEvent, schemas: Catalogue | None = None, limits: EventLimits = EventLimits()
) -> EventRow:
    """The outbox columns of `event`, validated and encoded. `SchemaError` names what is
    wrong, before anything is written."""
    what = f"event {event.event_type!r} of {event.aggregate_type}/{event.aggregate_id}"
    for field_name in ("aggregate_type", "aggregate_id", "event_type"):
        value = getattr(event, field_name)
        if not isinstance(value, str) or not value:
            raise SchemaError(f"{what}: {field_name} is required (a non-empty string)")
    for field_name in ("aggregate_id", "event_type", "trace_id", "causation_id"):
        if "\x00" in (getattr(event, field_name) or ""):
            raise SchemaError(
                f"{what}: {field_name} holds a NUL byte, which PostgreSQL cannot store"
            )
    if not AGGREGATE_TYPE.fullmatch(event.aggregate_type):
        raise SchemaError(
            f"{what}: aggregate_type may hold only letters, digits, '.', '_', "
            "'-', at most 200 (it names the topic)"
        )
    for field_name, limit in FIELD_MAX_BYTES.items():
        value = getattr(event, field_name) or ""
        if len(value.encode()) > limit:
            raise SchemaError(f"{what}: {field_name} is over its limit of {limit} bytes")
    if event.aggregate_type.endswith(DLQ_SUFFIX):
        raise SchemaError(
            f"{what}: aggregate types ending in {DLQ_SUFFIX!r} are reserved for dead-letter topics"
        )
    if event.aggregate_version is not None and (
        not isinstance(event.aggregate_version, int)
        or not 0 <= event.aggregate_version <= MAX_VERSION
    ):
        raise SchemaError(
            f"{what}: aggregate_version must be an integer from 0 to {MAX_VERSION} (a bigint)"
        )
    content_type = event.content_type
    encoded = None
    pre_encoded = isinstance(event.payload, bytes | bytearray | memoryview)
    if schemas is not None and not pre_encoded:
        encoded = schemas.encode(event.event_type, event.payload)  # validates, raises first
    if encoded is not None:
        payload, content_type = encoded
    elif pre_encoded:
        payload = bytes(event.payload)
    elif event.content_type == CONTENT_TYPE_JSON:
        payload = encode_json(event.payload, what)
    else:
        raise SchemaError(f"{what}: content type {event.content_type!r} needs bytes")
    if len(payload) > limits.max_payload_bytes:
        raise SchemaError(
            f"{what}: payload is {len(payload)} bytes, over the outbox limit of "
            f"{limits.max_payload_bytes} (CDCBOX_MAX_PAYLOAD_BYTES)"
        )
    if pre_encoded and content_type == CONTENT_TYPE_JSON:
        check_json(payload, what)  # after the cheaper size check
    return EventRow(
        event_id=event.event_id or uuid7(),
        aggregate_type=event.aggregate_type,
        aggregate_id=event.aggregate_id,
        aggregate_version=event.aggregate_version or 0,
        event_type=event.event_type,
        payload=payload,
        content_type=content_type,
        # "" names no trace on purpose (`tracing.continuing` in a batch); None: the
        # active span's.
        trace_id=(event.trace_id if event.trace_id is not None else current_traceparent()) or "",
        causation_id=event.causation_id or "",
    )


@dataclass(frozen=True)
class PreparedAppend:
    """An append, checked and encoded: one statement and its parameters, and the ids of
    the events it writes (none: nothing to send)."""

    statement: sql.Composed
    params: Sequence[Any]
    event_ids: list[uuid.UUID]


class Outbox:
    """Appends events to one outbox, in the caller's transaction; construct once, share
    freely (holds no connection). The table outbox by default; with `messages`, the
    outbox without a table (`cdcbox.producer.messages`), same API, same records."""

    def __init__(
        self,
        names: DbNames = DbNames(),
        schemas: Catalogue | None = None,
        limits: EventLimits = EventLimits(),
        messages: bool = False,
    ) -> None:
        """`schemas`: event types it declares are validated, and Avro ones encoded.
        `limits`: the payload size the table's CHECK allows (see cdcbox.limits).
        `messages`: emit logical decoding messages, no rows (the schema must have been
        migrated with `--relay messages`)."""
        self.names = names
        self.schemas = schemas
        self.limits = limits
        self.messages = messages
        # created_at (the router's record timestamp) and occurred_at (the ISO-8601 header)
        # come from one clock reading, so both relays report the same instant.
        template = sql.SQL(
            "INSERT INTO {table} ({cols}, created_at, occurred_at) "
            "SELECT e.*, n.ts, to_char(n.ts, {iso}) FROM {source} AS e, "
            "(SELECT clock_timestamp() AT TIME ZONE 'UTC' AS ts) AS n"
        )
        parts = {
            "table": names.table("outbox"),
            "cols": sql.SQL(", ").join(map(sql.Identifier, EVENT_COLUMNS)),
            "iso": sql.Literal(ISO_FORMAT),
        }
        self._insert_one = template.format(
            **parts,
            source=sql.SQL("(VALUES ({}))").format(
                sql.SQL(", ").join(sql.SQL("%s::" + t) for t in _TYPES)
            ),
        )
        self._insert_many = template.format(
            **parts,
            source=sql.SQL("unnest({})").format(
                sql.SQL(", ").join(sql.SQL("%s::" + t + "[]") for t in _TYPES)
            ),
        )
        self._emit = emit_statement(names)

    def append(self, conn: psycopg.Connection[Any], event: NewEvent) -> uuid.UUID:
        """Append one event in the open transaction of `conn`; returns its event id."""
        prepared = self.one(conn, event)
        with slot_refusal(self.messages):
            conn.execute(prepared.statement, prepared.params)
        return prepared.event_ids[0]

    def append_many(
        self, conn: psycopg.Connection[Any], events: Iterable[NewEvent]
    ) -> list[uuid.UUID]:
        """Append many events with one statement (one round trip, whatever the count)."""
        prepared = self.many(conn, events)
        if prepared.event_ids:
            with slot_refusal(self.messages):
                conn.execute(prepared.statement, prepared.params)
        return prepared.event_ids

    def emit(self, conn: Session, event: NewEvent) -> uuid.UUID:
        """`append` on a consumer's record session (`cdcbox.seam.outbox.OutboxWriter`):
        `UsageError` unless it is PostgreSQL's."""
        if not isinstance(conn, psycopg.Connection):
            raise wrong_session(self, conn)
        return self.append(conn, event)

    async def emit_async(self, conn: AsyncSession, event: NewEvent) -> uuid.UUID:
        """`emit` on the asynchronous view of the record's session."""
        if not isinstance(conn, psycopg.AsyncConnection):
            raise wrong_session(self, conn)
        prepared = self.one(conn, event)
        with slot_refusal(self.messages):
            await conn.execute(prepared.statement, prepared.params)
        return prepared.event_ids[0]

    def one(self, conn: ConnectionInfoSource, event: NewEvent) -> PreparedAppend:
        """The statement of `append`, checked (the event, then that `conn` is inside a
        transaction) before anything is sent: shared by the async outbox."""
        row = event_row(event, self.schemas, self.limits)
        _require_transaction(conn)
        if self.messages:
            return PreparedAppend(self._emit, emit_params([row.params()]), [row.event_id])
        return PreparedAppend(self._insert_one, row.params(), [row.event_id])

    def many(self, conn: ConnectionInfoSource, events: Iterable[NewEvent]) -> PreparedAppend:
        """The statement of `append_many` (no event ids: nothing to send)."""
        rows = [event_row(e, self.schemas, self.limits) for e in events]
        ids = [r.event_id for r in rows]
        if not rows:
            return PreparedAppend(self._insert_many, [], [])
        _require_transaction(conn)
        params = [r.params() for r in rows]
        if self.messages:
            return PreparedAppend(self._emit, emit_params(params), ids)
        columns = [list(c) for c in zip(*params, strict=True)]
        return PreparedAppend(self._insert_many, columns, ids)


@contextlib.contextmanager
def slot_refusal(messages: bool) -> Iterator[None]:
    """The emitting function's refusal (its slot missing or invalidated) as
    `SlotUnavailable`, one line naming the slot; the transaction is failed either way."""
    try:
        yield
    except psycopg.errors.ObjectNotInPrerequisiteState as e:
        if not messages:
            raise
        raise SlotUnavailable(
            f"{e.diag.message_primary}; the transaction is failed, roll it back "
            "(`cdc-ctl db migrate --relay messages` creates the slot)"
        ) from e


def wrong_session(outbox: object, conn: object) -> UsageError:
    """The error of a handler whose outbox (set by hand: the consumer binds its own
    database's) cannot write on the session the handler runs on."""
    return UsageError(
        f"a {type(outbox).__name__} cannot write on a {type(conn).__name__} session: set "
        "the handler's outbox to one of the database it runs on, or leave it None"
    )


def _require_transaction(conn: ConnectionInfoSource) -> None:
    status = conn.info.transaction_status
    if status == TransactionStatus.INERROR:
        raise UsageError("the transaction is aborted; roll it back before appending events")
    if status != TransactionStatus.INTRANS and not conn.info.pipeline_status:
        raise UsageError(
            "outbox append outside a transaction: the event must commit with your business "
            "change, so call it inside `with conn.transaction():` (or after your business "
            "statement on a non-autocommit connection)"
        )
