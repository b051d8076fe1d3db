"""The outbox without a table (issue 35): events emitted as logical decoding messages in
the caller's transaction, published by Debezium's decode transform and the same Outbox
Event Router, land as the records the table outbox makes, byte for byte; and no event can
be emitted into the hole no snapshot recovers (its slot missing)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import uuid
from collections.abc import Callable, Iterator
from typing import Any, cast
from unittest.mock import ANY

import psycopg
import pytest
from click.testing import CliRunner
from psycopg import sql

from cdcbox import wire
from cdcbox.cli.main import cli
from cdcbox.errors import SlotUnavailable
from cdcbox.ids import uuid7
from cdcbox.names import DbNames
from cdcbox.observe.pipeline_state import emit_ready
from cdcbox.ops import slots
from cdcbox.producer import AsyncOutbox, NewEvent, Outbox, UnitOfWork
from cdcbox.producer.columns import EVENT_COLUMNS
from cdcbox.producer.outbox import event_row
from cdcbox.resources import resource_dir
from cdcbox.stack.endpoints import Endpoints
from cdcbox.wire import CONTENT_TYPE_AVRO
from tests.e2e.topics import read_topic
from tests.helpers import drop_slot_once_released, unique

pytestmark = pytest.mark.e2e
MESSAGES_SPEC = "messages/outbox-messages.yaml"


@pytest.fixture
def messages_schema(stack: Endpoints) -> Iterator[tuple[DbNames, str]]:
    """A schema migrated for the outbox without a table, with its slot; dropped after."""
    names = DbNames(schema=unique("msg"))
    slot = names.schema
    with psycopg.connect(stack.dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(names.schema)))
    migrated = CliRunner().invoke(
        cli, ["--schema", names.schema, "db", "migrate", "--relay", "messages", "--slot", slot]
    )
    assert migrated.exit_code == 0, migrated.output
    yield names, slot
    drop_slot_once_released(stack.dsn, slot)
    with psycopg.connect(stack.dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(names.schema)))
        conn.execute(
            sql.SQL("DROP PUBLICATION IF EXISTS {}").format(sql.Identifier(names.publication))
        )


@pytest.fixture
def messages_connector(
    messages_schema: tuple[DbNames, str], spec_file: Callable[..., tuple[Any, str]]
) -> tuple[DbNames, str]:
    """The shipped messages spec applied for `messages_schema` (its own connector and
    topic prefix; the events' topics are the shipped spec's, outbox.event.<type>). The
    connector goes first at teardown: then its slot can be dropped."""
    names, slot = messages_schema
    path, name = spec_file(
        MESSAGES_SPEC,
        **{
            "slot.name": slot,
            "publication.name": names.publication,
            "message.prefix.include.list": names.message_prefix,
            "transforms.outbox.route.topic.replacement": "outbox.event.${routedByValue}",
        },
    )
    applied = CliRunner().invoke(cli, ["--schema", names.schema, "apply", str(path)])
    assert applied.exit_code == 0, applied.output
    return names, name


def events(aggregate_type: str) -> list[NewEvent]:
    """Every shape the wire carries: JSON with non-ASCII text, Avro bytes of every value,
    no version and a version past int32, trace and causation set and empty."""
    return [
        NewEvent(
            aggregate_type,
            "o-1",
            "OrderCreated",
            {"name": "café ☕ 𝄞", "n": [1, 2.5, None], "empty": [], "none": None},
            aggregate_version=7,
            trace_id="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            causation_id=str(uuid.uuid4()),
        ),
        NewEvent(
            aggregate_type,
            "ö-2",
            "Binary",
            bytes(range(256)) * 3,
            aggregate_version=2**40,
            content_type=CONTENT_TYPE_AVRO,
        ),
        NewEvent(aggregate_type, "o-3", "Unversioned", {}),
    ]


def as_table_row(conn: psycopg.Connection[Any], event: NewEvent, occurred_at: str) -> None:
    """`event` as a row of the public schema's table outbox, every column from `event`
    (encoded by `event_row`) but `occurred_at`, which the database stamped on the
    message: the stack's table connector publishes it."""
    row = event_row(event)
    conn.execute(
        sql.SQL("INSERT INTO {} ({}, created_at, occurred_at) VALUES ({}, now(), %s)").format(
            DbNames().table("outbox"),
            sql.SQL(", ").join(map(sql.Identifier, EVENT_COLUMNS)),
            sql.SQL(", ").join(sql.Placeholder() * len(EVENT_COLUMNS)),
        ),
        [*row.params(), occurred_at],
    )


def by_event_id(records: list[Any]) -> dict[str, list[Any]]:
    """Records by event id, each event's in offset order (one key, one partition)."""
    found: dict[str, list[Any]] = {}
    for record in sorted(records, key=lambda r: r.offset):
        found.setdefault(dict(record.headers)["id"].decode(), []).append(record)
    return found


def test_a_message_and_a_table_row_make_the_same_record(
    stack: Endpoints, messages_connector: tuple[DbNames, str]
) -> None:
    names, _ = messages_connector
    aggregate_type = unique("order")
    topic = wire.topic_for(aggregate_type)
    sent = [dataclasses.replace(e, event_id=uuid7()) for e in events(aggregate_type)]
    with psycopg.connect(stack.dsn) as conn, conn.transaction():
        Outbox(names, messages=True).append_many(conn, sent)
    from_messages = by_event_id(read_topic(stack, topic, expect=len(sent)))
    with psycopg.connect(stack.dsn) as conn, conn.transaction():
        for event in sent:
            (record,) = from_messages[str(event.event_id)]
            as_table_row(conn, event, dict(record.headers)["occurred_at"].decode())
    records = read_topic(stack, topic, expect=2 * len(sent), settle_ms=1000)
    assert len(records) == 2 * len(sent)
    for event in sent:
        message, row = by_event_id(records)[str(event.event_id)]
        assert message.value == event_row(event).payload  # the payload's bytes, as encoded
        for part in ("topic", "partition", "key", "value", "headers"):
            assert getattr(message, part) == getattr(row, part), (event.event_type, part)


def test_every_producer_path_emits_and_a_rollback_emits_nothing(
    stack: Endpoints, messages_connector: tuple[DbNames, str]
) -> None:
    names, _ = messages_connector
    aggregate_type = unique("order")
    outbox = Outbox(names, messages=True)
    with psycopg.connect(stack.dsn) as conn:
        with conn.transaction():
            outbox.append(conn, NewEvent(aggregate_type, "a", "One", {"path": "append"}))

        def failing_business_change() -> None:
            with conn.transaction():
                outbox.append(conn, NewEvent(aggregate_type, "a", "Gone", {}))
                conn.execute("SELECT 1 / 0")  # the business change fails: the event goes too

        with pytest.raises(psycopg.errors.DivisionByZero):
            failing_business_change()
        with UnitOfWork(conn, outbox) as unit:
            unit.publish(NewEvent(aggregate_type, "a", "Two", {"path": "unit of work"}))

    async def append_async() -> None:
        async with (
            await psycopg.AsyncConnection.connect(stack.dsn) as conn,
            conn.transaction(),
        ):
            await AsyncOutbox(names, messages=True).append(
                conn, NewEvent(aggregate_type, "a", "Three", {"path": "async"})
            )

    asyncio.run(append_async())
    records = read_topic(stack, wire.topic_for(aggregate_type), expect=3, settle_ms=1000)
    assert [dict(r.headers)["event_type"] for r in records] == [b"One", b"Two", b"Three"]


def test_no_event_is_emitted_while_the_slot_is_missing(
    stack: Endpoints, messages_schema: tuple[DbNames, str]
) -> None:
    """The hole no snapshot recovers: with the slot gone, the append fails the caller's
    transaction with one line naming the slot, so the business change cannot commit
    without its event; `doctor` and the exporter's reading say so."""
    names, slot = messages_schema
    drop_slot_once_released(stack.dsn, slot)
    with psycopg.connect(stack.dsn) as conn:
        conn.execute(f"CREATE TABLE IF NOT EXISTS {names.schema}.business (n int)")
        conn.commit()

        def business_change_with_its_event() -> None:
            with conn.transaction():
                conn.execute(f"INSERT INTO {names.schema}.business VALUES (1)")
                Outbox(names, messages=True).append(conn, NewEvent("order", "a", "Lost", {}))

        with pytest.raises(SlotUnavailable, match=f'replication slot "{slot}" is missing'):
            business_change_with_its_event()
        assert conn.execute(f"SELECT count(*) FROM {names.schema}.business").fetchone() == (0,)
        assert not emit_ready(conn, names)
    assert not messages_check(names, slot)["ok"]
    again = CliRunner().invoke(
        cli, ["--schema", names.schema, "db", "migrate", "--relay", "messages", "--slot", slot]
    )
    assert again.exit_code == 0, again.output
    assert messages_check(names, slot) == {
        "name": "messages outbox",
        "ok": True,
        "detail": f"{names.message_prefix} through slot {slot}: producers can emit",
        "fix": ANY,
    }
    with psycopg.connect(stack.dsn) as conn:
        assert emit_ready(conn, names)
        with conn.transaction():
            Outbox(names, messages=True).append(conn, NewEvent("order", "a", "Kept", {}))


def messages_check(names: DbNames, slot: str) -> dict[str, Any]:
    """`cdc-ctl doctor`'s "messages outbox" check of the shipped messages spec."""
    doctor = CliRunner().invoke(
        cli,
        ["--schema", names.schema, "doctor", str(resource_dir("connectors") / MESSAGES_SPEC),
         "--json"],
        env={**os.environ, "CDCBOX_SLOT_NAME": slot, "CDCBOX_PUBLICATION": names.publication,
             "CDCBOX_MESSAGE_PREFIX": names.message_prefix},
    )  # fmt: skip
    (check,) = [c for c in json.loads(doctor.output) if c["name"] == "messages outbox"]
    return cast(dict[str, Any], check)


def test_the_table_refuses_rows_and_modes_do_not_mix(
    stack: Endpoints, messages_schema: tuple[DbNames, str]
) -> None:
    names, _ = messages_schema

    def a_row() -> None:
        with psycopg.connect(stack.dsn) as conn, conn.transaction():
            Outbox(names).append(conn, NewEvent("order", "a", "Row", {}))

    with pytest.raises(psycopg.errors.FeatureNotSupported, match="Outbox\\(messages=True\\)"):
        a_row()
    runner = CliRunner()
    for relay in ("cdc", "polling"):
        mixed = runner.invoke(cli, ["--schema", names.schema, "db", "migrate", "--relay", relay])
        assert mixed.exit_code == 2, mixed.output
        assert "migrated for --relay messages" in mixed.output
        assert "Traceback" not in mixed.output
    no_slot = runner.invoke(
        cli, ["--schema", names.schema, "db", "migrate", "--relay", "messages", "--no-slot"]
    )
    assert no_slot.exit_code == 2 and "--no-slot" in no_slot.output, no_slot.output
    purge = runner.invoke(cli, ["--schema", names.schema, "outbox", "purge", "--older-than", "1d"])
    assert purge.exit_code == 2 and "nothing to purge" in purge.output, purge.output
    relayed = runner.invoke(cli, ["--schema", names.schema, "relay", "run", "--no-listen"])
    assert relayed.exit_code == 2 and "without a table" in relayed.output, relayed.output


def test_slot_drop_counts_the_unpublished_messages_it_would_lose(
    stack: Endpoints, messages_schema: tuple[DbNames, str]
) -> None:
    """No connector reads the slot yet: the three committed events are unpublished, the
    rolled-back one and the heartbeat are not events; `slot drop` refuses."""
    names, slot = messages_schema
    outbox = Outbox(names, messages=True)
    with psycopg.connect(stack.dsn) as conn:
        with conn.transaction():
            outbox.append_many(conn, [NewEvent("order", f"o{i}", "T", {}) for i in range(3)])
        conn.execute("SELECT pg_logical_emit_message(false, 'cdcbox-heartbeat', 'x')")
        outbox.append(conn, NewEvent("order", "gone", "T", {}))
        conn.rollback()
        conn.commit()
        assert slots.unpublished_inserts(conn, slot, names.publication) == 3
    refused = CliRunner().invoke(cli, ["--schema", names.schema, "slot", "drop", slot, "--yes"])
    assert refused.exit_code != 0, refused.output
    assert "3" in refused.output and "Traceback" not in refused.output


def test_apply_refuses_the_messages_spec_for_a_table_outbox(
    spec_file: Callable[..., tuple[Any, str]],
) -> None:
    """The public schema was migrated for CDC: its producers write rows the messages
    connector would never read."""
    path, _ = spec_file(MESSAGES_SPEC)
    refused = CliRunner().invoke(cli, ["apply", str(path)])
    assert refused.exit_code == 2, refused.output
    assert "was not migrated with --relay messages" in refused.output
    assert "Traceback" not in refused.output
