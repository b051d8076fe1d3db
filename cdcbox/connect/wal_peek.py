"""What a replication slot still holds for its connector, read without consuming it.

`pg_logical_slot_peek_binary_changes` with pgoutput (protocol 1) returns the slot's
pending changes in commit order and leaves the slot where it was. The slot must be
inactive (its connector stopped). Only INSERTs into one table are decoded: that is all
an outbox publication publishes.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import psycopg

from cdcbox.errors import UsageError


@dataclass(frozen=True)
class WalInsert:
    """One INSERT as the slot will stream it: its LSN, its transaction's id and commit
    LSN, and the row's columns as PostgreSQL's text output (None for NULL)."""

    lsn: int
    xid: int
    commit_lsn: int
    columns: dict[str, str | None]

    @property
    def row_id(self) -> int:
        """The `id` column (the outbox's primary key)."""
        return int(self.columns.get("id") or 0)


def lsn_text(lsn: int) -> str:
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def parse_lsn(text: str) -> int:
    high, low = text.split("/")
    return (int(high, 16) << 32) + int(low, 16)


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.at = data, 0

    def take(self, fmt: str) -> Any:
        (value,) = struct.unpack_from(fmt, self.data, self.at)
        self.at += struct.calcsize(fmt)
        return value

    def cstring(self) -> str:
        end = self.data.index(b"\0", self.at)
        text = self.data[self.at : end].decode()
        self.at = end + 1
        return text

    def raw(self, n: int) -> bytes:
        chunk = self.data[self.at : self.at + n]
        self.at += n
        return chunk


def _tuple(reader: _Reader) -> list[str | None]:
    values: list[str | None] = []
    for _ in range(reader.take(">h")):
        kind = reader.take(">c")
        if kind == b"t":
            values.append(reader.raw(reader.take(">i")).decode())
        else:  # 'n' NULL, 'u' unchanged TOAST (never in an INSERT)
            values.append(None)
    return values


def peek_inserts(
    conn: psycopg.Connection[Any],
    slot: str,
    publication: str,
    table: tuple[str, str],
    limit: int = 200_000,
) -> list[WalInsert]:
    """The first `limit` changes pending on `slot`, as the INSERTs into `table`
    (schema, name) among them, in the order the connector would stream them."""
    try:
        with conn.transaction():
            rows = conn.execute(
                "SELECT lsn::text, data FROM pg_logical_slot_peek_binary_changes("
                "%s, NULL, %s, 'proto_version', '1', 'publication_names', %s)",
                (slot, limit, publication),
            ).fetchall()
    except psycopg.errors.ObjectInUse:
        raise UsageError(f"slot {slot!r} is active: stop its connector first") from None
    except psycopg.errors.UndefinedObject as e:
        raise UsageError(f"cannot read slot {slot!r}: {' '.join(str(e).split())}") from None
    relations: dict[int, tuple[str, str, list[str]]] = {}
    found: list[WalInsert] = []
    xid = commit_lsn = 0
    for lsn, data in rows:
        reader = _Reader(bytes(data))
        kind = reader.take(">c")
        if kind == b"B":
            commit_lsn = reader.take(">Q")
            reader.take(">q")  # commit timestamp
            xid = reader.take(">I")
        elif kind == b"R":
            oid, namespace, name = reader.take(">I"), reader.cstring(), reader.cstring()
            reader.take(">b")  # replica identity
            columns = []
            for _ in range(reader.take(">h")):
                reader.take(">b")  # flags
                columns.append(reader.cstring())
                reader.take(">I")  # type oid
                reader.take(">i")  # type modifier
            relations[oid] = (namespace, name, columns)
        elif kind == b"I":
            namespace, name, columns = relations[reader.take(">I")]
            reader.take(">c")  # 'N': a new tuple follows
            if (namespace, name) == table:
                row = dict(zip(columns, _tuple(reader), strict=True))
                found.append(WalInsert(parse_lsn(lsn), xid, commit_lsn, row))
    return found
