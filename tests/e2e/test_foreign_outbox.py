"""Events of a service that is not cdcbox: its outbox is the table Debezium's
documentation uses (`outboxevent`), published by a second connector configured as that
documentation shows (not through cdcbox's spec): the router's defaults plus
`table.fields.additional.placement=type:header:eventType`. A plain handler, written as
the README shows, consumes them with no configuration: every event applied once, a full
redelivery dropped by the inbox. A variant of the same service's connector — ids that are
not UUIDs, the `jsonb` payload left as the router's JSON string inside JsonConverter's
schema envelope, a version column placed as a header — is consumed the same way, its
version guard dropping a stale event."""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.types.json import Jsonb

from cdcbox import wire
from cdcbox.connect.client import ConnectClient
from cdcbox.consumer import Outcome
from cdcbox.stack.endpoints import Endpoints
from tests.e2e.conftest import count_effects, effects, recording_handler
from tests.e2e.topics import read_topic
from tests.helpers import drop_slot_once_released, eventually, unique

pytestmark = pytest.mark.e2e

# The outbox table of Debezium's documentation (id, aggregatetype, aggregateid, type,
# payload), plus a version column for the variant.
OUTBOXEVENT = """
CREATE TABLE {table} (
    id            {id_type} PRIMARY KEY,
    aggregatetype varchar(255) NOT NULL,
    aggregateid   varchar(255) NOT NULL,
    type          varchar(255) NOT NULL,
    timestamp     timestamp    NOT NULL DEFAULT now(),
    payload       jsonb,
    version       bigint
)"""


def documented_connector(name: str, table: str, publication: str) -> dict[str, str]:
    """The PostgreSQL connector with the Outbox Event Router as Debezium's documentation
    configures it; only what this stack needs to reach its database is added (pgoutput,
    since decoderbufs is not installed; credentials through Connect's file provider)."""
    return {
        "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
        "database.hostname": os.environ["CDCBOX_CONNECT_DB_HOST"],
        "database.port": os.environ["CDCBOX_CONNECT_DB_PORT"],
        "database.dbname": os.environ["CDCBOX_CONNECT_DB_NAME"],
        "database.user": "cdcbox_debezium",
        "database.password": f"${{file:{os.environ['CDCBOX_CONNECT_DB_SECRETS']}:password}}",
        "topic.prefix": name,
        "plugin.name": "pgoutput",
        "slot.name": name.replace("-", "_"),
        "publication.name": publication,
        "table.include.list": table,
        "tombstones.on.delete": "false",
        "transforms": "outbox",
        "transforms.outbox.type": "io.debezium.transforms.outbox.EventRouter",
        "transforms.outbox.table.fields.additional.placement": "type:header:eventType",
        "transforms.outbox.table.expand.json.payload": "true",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
    }


@pytest.fixture
def foreign_service(
    stack: Endpoints, connect_client: ConnectClient
) -> Iterator[Callable[..., str]]:
    """`make(id_type, **config)`: a schema with an `outboxevent` table, its publication
    (as the service's DBA creates it) and a connector on it, RUNNING; the table's name.
    Everything is removed afterwards."""
    made: list[tuple[str, str, str]] = []

    def make(id_type: str = "uuid", **overrides: str | None) -> str:
        schema, name = unique("foreign"), unique("foreign-outbox")
        table, publication = f"{schema}.outboxevent", f"{schema}_outbox"
        with psycopg.connect(stack.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
            conn.execute(
                sql.SQL(OUTBOXEVENT).format(
                    table=sql.Identifier(schema, "outboxevent"), id_type=sql.SQL(id_type)
                )
            )
            conn.execute(
                sql.SQL(
                    "CREATE PUBLICATION {} FOR TABLE {t}; GRANT USAGE ON SCHEMA {s} TO "
                    "cdcbox_debezium; GRANT SELECT ON {t} TO cdcbox_debezium"
                ).format(
                    sql.Identifier(publication),
                    t=sql.Identifier(schema, "outboxevent"),
                    s=sql.Identifier(schema),
                )
            )
        config = documented_connector(name, table, publication)
        for key, value in overrides.items():
            key = key.replace("__", ".")
            if value is None:
                config.pop(key, None)
            else:
                config[key] = value
        made.append((schema, name, publication))
        connect_client.put_config(name, config)
        connect_client.wait_until(name, "RUNNING", 120)
        return table

    yield make
    for schema, name, publication in made:
        if connect_client.config(name) is not None:
            connect_client.delete(name)
        drop_slot_once_released(stack.dsn, name.replace("-", "_"))
        with psycopg.connect(stack.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
            conn.execute(sql.SQL("DROP PUBLICATION {}").format(sql.Identifier(publication)))


def write(dsn: str, table: str, rows: list[tuple[Any, ...]]) -> None:
    """The foreign service's transaction: (id, aggregatetype, aggregateid, type, payload,
    version) per event."""
    schema, name = table.split(".")
    with psycopg.connect(dsn) as conn, conn.transaction(), conn.cursor() as cur:
        cur.executemany(
            sql.SQL(
                "INSERT INTO {} (id, aggregatetype, aggregateid, type, payload, version) "
                "VALUES (%s, %s, %s, %s, %s, %s)"
            ).format(sql.Identifier(schema, name)),
            rows,
        )


def test_a_plain_handler_consumes_a_documented_debezium_outbox(
    stack: Endpoints, foreign_service: Callable[..., str], run_consumer: Any
) -> None:
    table = foreign_service()
    aggregate_type, consumer = unique("Order"), unique("foreign-orders")
    rows = [
        (uuid.uuid4(), aggregate_type, str(n % 7), "OrderCreated", Jsonb({"n": n}), None)
        for n in range(40)
    ]
    write(stack.dsn, table, rows)
    handler = recording_handler(consumer, aggregate_type, {"OrderCreated"})
    with run_consumer([handler], group=consumer) as running:
        eventually(lambda: count_effects(stack.dsn, consumer) == 40, what="40 foreign events")
        assert running.consumer.stats[Outcome.DEAD_LETTERED] == 0
    with psycopg.connect(stack.dsn) as conn:
        applied = effects(conn, consumer)
    assert sorted(row[0] for row in applied) == sorted(row[0] for row in rows)
    assert sorted(row[4]["n"] for row in applied) == list(range(40))
    assert {row[3]["event_type"] for row in applied} == {"OrderCreated"}
    assert {row[3]["aggregate_type"] for row in applied} == {aggregate_type}  # from the topic
    # The whole topic again (a new group starts at its beginning) under the same consumer
    # name, moved to that group: the inbox drops every copy.
    again = recording_handler(consumer, aggregate_type, {"OrderCreated"})
    with run_consumer([again], group=unique("again"), move_to_group=True) as running:
        eventually(lambda: running.consumer.stats[Outcome.DUPLICATE] == 40, what="copies")
    assert count_effects(stack.dsn, consumer) == 40


def test_ids_that_are_not_uuids_a_json_string_payload_and_a_placed_version(
    stack: Endpoints, foreign_service: Callable[..., str], run_consumer: Any
) -> None:
    table = foreign_service(
        id_type="varchar(255)",
        transforms__outbox__table__fields__additional__placement=(
            "type:header:eventType,version:header:aggregate_version"
        ),
        transforms__outbox__table__expand__json__payload=None,  # jsonb as a JSON string
        value__converter__schemas__enable=None,  # JsonConverter's default: an envelope
    )
    aggregate_type, consumer = unique("Customer"), unique("foreign-customers")
    moved = lambda i, key, v: (f"moved-{i}", aggregate_type, key, "Moved", Jsonb({"i": i}), v)  # noqa: E731
    write(stack.dsn, table, [moved(1, "c1", 1), moved(2, "c1", 2), moved(3, "c2", 1)])
    write(stack.dsn, table, [moved(4, "c1", 1)])  # an older version arriving late: stale
    (record, *_) = read_topic(stack, f"outbox.event.{aggregate_type}", expect=4)
    assert json.loads(record.value)["payload"].startswith("{")  # a string inside an envelope
    handler = recording_handler(consumer, aggregate_type, {"Moved"})
    with run_consumer([handler], group=consumer) as running:
        eventually(lambda: running.consumer.stats.total == 4, what="four foreign events")
        assert running.consumer.stats[Outcome.STALE] == 1
    with psycopg.connect(stack.dsn) as conn:
        applied = effects(conn, consumer)
    # (aggregate, version from the placed header, payload) of each applied event.
    assert sorted((row[1], row[2], row[4]["i"]) for row in applied) == [
        ("c1", 1, 1),
        ("c1", 2, 2),
        ("c2", 1, 3),
    ]
    topic = f"outbox.event.{aggregate_type}"
    assert {row[0] for row in applied} == {
        wire.foreign_event_key(topic, key, f"moved-{i}")
        for i, key in ((1, "c1"), (2, "c1"), (3, "c2"))
    }
