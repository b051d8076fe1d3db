"""What the outbox without a table needs of its database, checked before its connector
is applied and by `doctor`: the schema migrated for it, the connector reading this
schema's message prefix, a publication of no table, and its slot, healthy.

A connector spec reads messages when it names a `message.prefix.include.list` and
decodes them with Debezium's `DecodeLogicalDecodingMessageContent`
(`connectors/messages/`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import psycopg

from cdcbox.errors import UsageError
from cdcbox.migrate import recorded_relay_mode
from cdcbox.names import DbNames
from cdcbox.ops.check import Check

DECODE_TRANSFORM = "io.debezium.connector.postgresql.transforms.DecodeLogicalDecodingMessageContent"
PREFIXES = "message.prefix.include.list"


def reads_messages(config: Mapping[str, str]) -> bool:
    """Whether the connector publishes the outbox without a table."""
    decodes = any(
        k.startswith("transforms.") and k.endswith(".type") and v == DECODE_TRANSFORM
        for k, v in config.items()
    )
    return decodes and bool(config.get(PREFIXES))


def message_spec_problems(
    conn: psycopg.Connection[Any], config: Mapping[str, str], names: DbNames
) -> list[str]:
    """Why the connector would publish none of this schema's events (empty: none)."""
    problems = []
    if recorded_relay_mode(conn, names) != "messages":
        problems.append(
            f"schema {names.schema!r} was not migrated with --relay messages: its producers "
            "write rows, which this connector never reads"
        )
    prefixes = [p.strip() for p in config.get(PREFIXES, "").split(",")]
    if names.message_prefix not in prefixes:
        problems.append(
            f"{PREFIXES} is {', '.join(prefixes)}, not {names.message_prefix} (this "
            "schema's prefix): set CDCBOX_MESSAGE_PREFIX"
        )
    publication = config.get("publication.name", names.publication)
    tables = conn.execute(
        "SELECT count(*) FROM pg_publication_tables WHERE pubname = %s", (publication,)
    ).fetchone()
    if tables and tables[0]:
        problems.append(
            f"publication {publication!r} covers tables: their rows would be published as "
            "change events beside the messages (the messages mode's publication covers none)"
        )
    return problems


def refuse_unpublishable_messages(
    conn: psycopg.Connection[Any], config: Mapping[str, str], names: DbNames
) -> None:
    """`UsageError` naming each `message_spec_problems`."""
    with conn.transaction():
        problems = message_spec_problems(conn, config, names)
    if problems:
        raise UsageError("; ".join(problems))


def messages_outbox_check(
    conn: psycopg.Connection[Any], config: Mapping[str, str], names: DbNames
) -> Check:
    """`doctor`'s check of the outbox without a table: the spec's problems, and whether
    producers can emit now (the slot there, consistent, not invalidated)."""
    slot = config.get("slot.name", "")
    problems = message_spec_problems(conn, config, names)
    row = conn.execute(
        "SELECT confirmed_flush_lsn IS NOT NULL, wal_status FROM pg_replication_slots "
        "WHERE slot_name = %s AND database = current_database()",
        (slot,),
    ).fetchone()
    if row is None:
        problems.append(f"slot {slot} is missing: producers refuse to emit")
    elif not row[0] or row[1] == "lost":
        problems.append(f"slot {slot} is {row[1] or 'not consistent yet'}: producers refuse")
    return Check(
        "messages outbox",
        not problems,
        "; ".join(problems) or f"{names.message_prefix} through slot {slot}: producers can emit",
        "`cdc-ctl db migrate --relay messages --slot SLOT` (an invalidated slot: drop it, "
        "migrate again, and replay what was lost from its producers' records)",
    )
