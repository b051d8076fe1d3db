"""Avro events end to end: bytes unchanged through Debezium and the polling relay, decoded
by a consumer reading with a newer (compatible) schema; unknown schemas dead-lettered."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from cdcbox import wire
from cdcbox.avro import MAGIC, Catalogue
from cdcbox.consumer import Outcome
from cdcbox.names import DbNames
from cdcbox.producer.outbox import NewEvent, Outbox
from cdcbox.relay import RelayConfig, RelayWorker
from cdcbox.resources import resource_dir
from cdcbox.stack.endpoints import Endpoints
from tests.e2e.conftest import count_effects, effects, recording_handler
from tests.e2e.test_consumer_failures import dead_letters
from tests.e2e.topics import read_topic
from tests.helpers import eventually, migrated_schema, unique

pytestmark = pytest.mark.e2e
SHIPPED = resource_dir("schemas") / "avro"
ORDER = {
    "order_id": "o1",
    "customer_id": "c1",
    "total_cents": 1250,
    "coupon": "WELCOME",
    "lines": [{"sku": "s1", "quantity": 2, "price_cents": 625}],
}


@pytest.fixture
def v1_producer_catalogue(tmp_path: Path) -> Catalogue:
    """The catalogue of a producer deployed before OrderCreated v2 existed."""
    for name in (
        "events.yaml",
        "OrderCreated.v1.avsc",
        "PaymentSucceeded.v1.avsc",
        "OrderCancelled.v1.avsc",
    ):
        shutil.copy(SHIPPED / name, tmp_path)
    return Catalogue.load(tmp_path)


def append_order(
    dsn: str, catalogue: Catalogue, aggregate_type: str, order: dict[str, Any]
) -> tuple[bytes, str]:
    """One OrderCreated appended with `catalogue`; its payload and content type as stored."""
    with psycopg.connect(dsn) as conn, conn.transaction():
        Outbox(schemas=catalogue).append(
            conn, NewEvent(aggregate_type, "o1", "OrderCreated", order, aggregate_version=1)
        )
        stored = conn.execute(
            "SELECT payload, content_type FROM outbox_event WHERE aggregate_type = %s",
            (aggregate_type,),
        ).fetchone()
    assert stored is not None
    return bytes(stored[0]), str(stored[1])


def test_avro_through_debezium_is_read_with_a_newer_schema(
    stack: Endpoints, run_consumer: Any, v1_producer_catalogue: Catalogue
) -> None:
    aggregate_type, consumer = unique("order"), unique("c")
    stored = append_order(stack.dsn, v1_producer_catalogue, aggregate_type, ORDER)
    assert stored[1] == wire.CONTENT_TYPE_AVRO
    assert bytes(stored[0])[:2] == MAGIC
    handler = recording_handler(consumer, aggregate_type, {"OrderCreated"})
    with run_consumer([handler], group=consumer, schemas=Catalogue.load(SHIPPED)):
        eventually(lambda: count_effects(stack.dsn, consumer) == 1, what="the Avro event")
    with psycopg.connect(stack.dsn) as conn:
        (row,) = effects(conn, consumer)
    assert row[4] == {**ORDER, "channel": "web"}  # v1 bytes, v2 reader: the default
    assert row[3]["content_type"] == wire.CONTENT_TYPE_AVRO


def test_avro_through_the_polling_relay_is_byte_identical_and_decoded(
    stack: Endpoints, run_consumer: Any, v1_producer_catalogue: Catalogue
) -> None:
    names = migrated_schema(stack.dsn, DbNames(schema=unique("avro")))
    aggregate_type, consumer = unique("order"), unique("c")
    with psycopg.connect(stack.dsn) as conn, conn.transaction():
        Outbox(names, schemas=v1_producer_catalogue).append(
            conn, NewEvent(aggregate_type, "o1", "OrderCreated", ORDER)
        )
        payload = conn.execute(
            sql.SQL("SELECT payload FROM {}").format(names.table("outbox"))
        ).fetchone()
    relay = RelayWorker(
        RelayConfig(dsn=stack.dsn, bootstrap_servers=stack.bootstrap_servers, listen=False),
        names=names,
    )
    assert relay.run(until_idle=True).sent == 1
    handler = recording_handler(consumer, aggregate_type, {"OrderCreated"})
    with run_consumer([handler], group=consumer, schemas=Catalogue.load(SHIPPED)):
        eventually(lambda: count_effects(stack.dsn, consumer) == 1, what="the relayed event")
    with psycopg.connect(stack.dsn) as conn:
        (row,) = effects(conn, consumer)
    assert row[4] == {**ORDER, "channel": "web"}
    assert payload is not None
    (record,) = read_topic(stack, wire.topic_for(aggregate_type), expect=1)
    assert record.value == bytes(payload[0])


def test_unknown_schema_fingerprint_is_dead_lettered(stack: Endpoints, run_consumer: Any) -> None:
    aggregate_type, consumer = unique("order"), unique("c")
    with psycopg.connect(stack.dsn) as conn, conn.transaction():
        Outbox().append(
            conn,
            NewEvent(
                aggregate_type,
                "o1",
                "OrderCreated",
                MAGIC + uuid.uuid4().bytes[:8] + b"\x02",
                content_type=wire.CONTENT_TYPE_AVRO,
            ),
        )
        Outbox().append(
            conn,
            NewEvent(
                aggregate_type, "o2", "OrderCreated", b"\x00", content_type=wire.CONTENT_TYPE_AVRO
            ),
        )
    handler = recording_handler(consumer, aggregate_type, {"OrderCreated"})
    with run_consumer([handler], group=consumer, schemas=Catalogue.load(SHIPPED)) as running:
        eventually(lambda: running.stats[Outcome.DEAD_LETTERED] == 2, what="both dead-lettered")
    assert count_effects(stack.dsn, consumer) == 0
    letters = dead_letters(stack, wire.topic_for(aggregate_type) + ".dlq", expect=2)
    reasons = sorted(dict(r.headers)["cdcbox.error.message"].decode() for r in letters)
    assert reasons[0].startswith("unknown Avro schema fingerprint")
    assert reasons[1].startswith("value is not Avro single-object encoded")
