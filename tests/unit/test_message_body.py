"""The outbox without a table, without a database: what a message carries, and which
migrations of a schema refuse to mix modes."""

from __future__ import annotations

import json

import pytest

from cdcbox.errors import UsageError
from cdcbox.migrate import refuse_mode_change, render_sql
from cdcbox.names import DbNames
from cdcbox.producer import NewEvent
from cdcbox.producer.columns import EVENT_COLUMNS
from cdcbox.producer.messages import PAYLOAD_CHARSET, emit_params, message_body
from cdcbox.producer.outbox import event_row
from cdcbox.wire import CONTENT_TYPE_AVRO

pytestmark = pytest.mark.unit


def test_a_message_is_ascii_json_and_gives_back_every_payload_byte() -> None:
    rows = [
        event_row(NewEvent("order", "ö-1", "Binary", bytes(range(256)), 2**40,
                           content_type=CONTENT_TYPE_AVRO)),
        event_row(NewEvent("order", "o-2", "Text", {"name": "café 𝄞", "none": None})),
    ]  # fmt: skip
    types, bodies = emit_params([r.params() for r in rows])
    assert types == ["order", "order"]
    for row, body in zip(rows, bodies, strict=True):
        assert body.isascii() and not body.startswith(b"{")  # the database writes "{"
        fields = json.loads(b'{"occurred_at":"x",' + body)
        assert list(fields) == ["occurred_at", *EVENT_COLUMNS]
        assert fields["payload"].encode(PAYLOAD_CHARSET) == row.payload
        assert fields["event_id"] == str(row.event_id)
        assert fields["aggregate_version"] == row.aggregate_version
        assert fields["aggregate_id"] == row.aggregate_id


def test_a_body_holds_the_columns_it_is_given() -> None:
    row = event_row(NewEvent("order", "o-1", "T", {}, trace_id="", causation_id="c"))
    fields = json.loads(b"{" + message_body(row.params()))
    assert (fields["trace_id"], fields["causation_id"]) == ("", "c")


@pytest.mark.parametrize(
    ("done", "mode"),
    [({"cdc/0001_debezium"}, "messages"), ({"polling/0001_relay_indexes"}, "messages"),
     ({"messages/0001_emit"}, "cdc"), ({"messages/0001_emit"}, "polling")],
)  # fmt: skip
def test_a_schema_keeps_its_outbox_mode(done: set[str], mode: str) -> None:
    with pytest.raises(UsageError, match="one schema has one outbox mode"):
        refuse_mode_change({"0001_outbox", *done}, mode, DbNames())  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("done", "mode"),
    [(set(), "messages"), ({"messages/0001_emit"}, "messages"),
     ({"cdc/0001_debezium"}, "polling"), ({"polling/0001_relay_indexes"}, "cdc")],
)  # fmt: skip
def test_the_same_mode_and_the_table_modes_migrate_again(done: set[str], mode: str) -> None:
    refuse_mode_change({"0001_outbox", *done}, mode, DbNames())  # type: ignore[arg-type]


def test_the_sql_script_of_the_messages_mode_names_its_slot() -> None:
    """`cdc-ctl db sql --relay messages`, for a team's own migration tool: the
    migrations, their ledger rows, and the emitting function guarded by the slot."""
    script = render_sql("messages", DbNames(schema="shop"), slot="shop_slot")
    assert (
        'INSERT INTO "shop"."cdcbox_schema_migrations" (version) VALUES (\'messages/0001_emit\')'
        in script
    )
    assert 'CREATE OR REPLACE FUNCTION "shop"."outbox_event_emit"' in script
    assert "'shop_slot'" in script and "'cdcbox_outbox_shop'" in script
