"""Avro in the Confluent wire format through the stack's schema registry (Apicurio's
Confluent-compatible API), proven by code we did not write: confluent-kafka's own
`AvroDeserializer` reads cdcbox's events off the topic Debezium published them to, and
records its `AvroSerializer` wrote are applied by a cdcbox handler. `cdc-ctl schemas
check` refuses a change the registry would refuse though the files alone allow it."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import Producer as ConfluentProducer
from confluent_kafka.schema_registry import SchemaRegistryClient, record_subject_name_strategy
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from cdcbox import wire
from cdcbox.avro import Catalogue
from cdcbox.cli.main import cli
from cdcbox.consumer import Outcome
from cdcbox.resources import resource_dir
from cdcbox.schema_registry import RegistryConfig, SchemaRegistry, frame
from cdcbox.stack.endpoints import Endpoints
from tests.e2e.conftest import count_effects, effects, recording_handler
from tests.e2e.test_avro_events import append_order
from tests.e2e.test_consumer_failures import dead_letters
from tests.e2e.test_readme import ROOT, block
from tests.helpers import eventually, unavailable, unique

pytestmark = pytest.mark.e2e
SHIPPED = resource_dir("schemas") / "avro"
ORDER = {
    "order_id": "o1",
    "customer_id": "c1",
    "total_cents": 1250,
    "coupon": None,
    "lines": [{"sku": "s1", "quantity": 2, "price_cents": 625}],
}


def registry_url(stack: Endpoints) -> str:
    if not stack.registry_url:
        unavailable("the stack runs no schema registry (CDCBOX_REGISTRY_URL is not set)")
    return stack.registry_url


def registered_catalogue(stack: Endpoints) -> Catalogue:
    """The shipped catalogue writing through the stack's registry, with a cold cache."""
    registry = SchemaRegistry(RegistryConfig(registry_url(stack)))
    return Catalogue.load(SHIPPED).with_registry(registry)


def confluent_client(stack: Endpoints) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": registry_url(stack)})


def read_with_confluent(stack: Endpoints, topic: str, expect: int) -> list[Any]:
    """`expect` records of `topic` as confluent-kafka reads them (librdkafka, its
    deserializer fetching each writer schema by the id in the record)."""
    deserializer = AvroDeserializer(confluent_client(stack))
    reader = ConfluentConsumer(
        {
            "bootstrap.servers": stack.bootstrap_servers,
            "group.id": unique("confluent"),
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    reader.subscribe([topic])
    values: list[Any] = []

    def more() -> bool:
        message = reader.poll(1.0)
        if message is not None and message.error() is None:
            context = SerializationContext(topic, MessageField.VALUE)
            values.append(deserializer(message.value(), context))
        return len(values) >= expect

    try:
        eventually(more, timeout=60, interval=0, what=f"{expect} record(s) on {topic}")
    finally:
        reader.close()
    return values


def test_cdcbox_events_are_read_by_confluents_deserializer(stack: Endpoints) -> None:
    aggregate_type = unique("order")
    catalogue = registered_catalogue(stack)
    order = {**ORDER, "channel": "app"}
    stored = append_order(stack.dsn, catalogue, aggregate_type, order)
    assert stored[1] == wire.CONTENT_TYPE_AVRO
    latest = catalogue.events["OrderCreated"].latest
    schema_id = confluent_client(stack).get_latest_version(latest.full_name).schema_id
    assert schema_id is not None
    assert bytes(stored[0])[:5] == b"\x00" + schema_id.to_bytes(4, "big")
    # Through Debezium's router unchanged, then decoded by code we did not write.
    assert read_with_confluent(stack, wire.topic_for(aggregate_type), 1) == [order]


def test_records_confluents_serializer_wrote_are_applied_by_a_handler(
    stack: Endpoints, run_consumer: Any
) -> None:
    """v1 and v2 records, each registered and framed by confluent-kafka under the
    record-name subject; the handler reads both with the catalogue's newest schema."""
    aggregate_type, consumer = unique("order"), unique("c")
    topic = wire.topic_for(aggregate_type)
    producer = ConfluentProducer({"bootstrap.servers": stack.bootstrap_servers})
    event_ids = []
    for version, order in ((1, ORDER), (2, {**ORDER, "order_id": "o2", "channel": "app"})):
        schema = (SHIPPED / f"OrderCreated.v{version}.avsc").read_text()
        serializer = AvroSerializer(
            confluent_client(stack),
            schema,
            conf={"subject.name.strategy": record_subject_name_strategy},
        )
        event_id = str(uuid.uuid4())
        event_ids.append(event_id)
        producer.produce(
            topic,
            key="o1",  # one aggregate: one partition, in order
            value=serializer(order, SerializationContext(topic, MessageField.VALUE)),
            headers={"id": event_id, "event_type": "OrderCreated"},
        )
    assert producer.flush(30) == 0
    handler = recording_handler(consumer, aggregate_type, {"OrderCreated"})
    with run_consumer([handler], group=consumer, schemas=registered_catalogue(stack)):
        eventually(lambda: count_effects(stack.dsn, consumer) == 2, what="both records")
    with psycopg.connect(stack.dsn) as conn:
        rows = effects(conn, consumer)
    assert [str(row[0]) for row in rows] == event_ids
    assert [row[4] for row in rows] == [
        {**ORDER, "channel": "web"},  # v1 bytes, v2 reader: the default
        {**ORDER, "order_id": "o2", "channel": "app"},
    ]


def test_the_guides_producer_outside_cdcbox_reaches_a_handler(
    stack: Endpoints, run_consumer: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Avro guide's example of a producer that is not cdcbox (confluent-kafka's
    producer and serializer, the headers the guide names), run as written but for the
    stack's addresses and a topic of its own: a cdcbox handler applies its record, with
    its event id and version."""
    monkeypatch.chdir(ROOT)
    aggregate_type, consumer = unique("order"), unique("c")
    example = (
        block("serialize = AvroSerializer(registry")
        .replace("http://127.0.0.1:28081/apis/ccompat/v7", registry_url(stack))
        .replace("127.0.0.1:59092", stack.bootstrap_servers)
        .replace('"outbox.event.order"', repr(wire.topic_for(aggregate_type)))
    )
    namespace: dict[str, Any] = {}
    exec(compile(example, "docs (producer outside cdcbox)", "exec"), namespace)  # noqa: S102
    handler = recording_handler(consumer, aggregate_type, {"OrderCreated"})
    with run_consumer([handler], group=consumer, schemas=registered_catalogue(stack)):
        eventually(lambda: count_effects(stack.dsn, consumer) == 1, what="the record")
    with psycopg.connect(stack.dsn) as conn:
        ((_, aggregate_id, version, headers, payload),) = effects(conn, consumer)
    assert (aggregate_id, version, headers["event_type"]) == ("o-42", 1, "OrderCreated")
    assert payload == namespace["order"]


def test_a_schema_id_the_registry_lacks_is_dead_lettered_naming_it(
    stack: Endpoints, run_consumer: Any
) -> None:
    aggregate_type, consumer = unique("order"), unique("c")
    topic = wire.topic_for(aggregate_type)
    missing_id = 2_000_000_000
    producer = ConfluentProducer({"bootstrap.servers": stack.bootstrap_servers})
    producer.produce(
        topic,
        key="o1",
        value=frame(missing_id, b"\x02o1"),
        headers={"id": str(uuid.uuid4()), "event_type": "OrderCreated"},
    )
    assert producer.flush(30) == 0
    handler = recording_handler(consumer, aggregate_type, {"OrderCreated"})
    with run_consumer([handler], group=consumer, schemas=registered_catalogue(stack)) as running:
        eventually(
            lambda: running.stats[Outcome.DEAD_LETTERED] == 1,
            what="the record dead-lettered",
        )
    (letter,) = dead_letters(stack, topic + wire.DLQ_SUFFIX, 1)
    message = dict(letter.headers)["cdcbox.error.message"].decode()
    assert f"schema id {missing_id}" in message
    assert count_effects(stack.dsn, consumer) == 0


def test_schemas_check_refuses_what_the_registry_refuses(stack: Endpoints, tmp_path: Path) -> None:
    """One version in the files (nothing to compare there); the registry holds an older
    one that the edited file cannot read: only the registry's check sees it."""
    namespace = unique("cdcbox.test").replace("-", "_")
    shutil.copy(SHIPPED / "events.yaml", tmp_path / "events.yaml")
    (tmp_path / "events.yaml").write_text("Audited:\n  encoding: avro\n")
    fields = [{"name": "who", "type": "string"}]
    schema = {"type": "record", "name": "Audited", "namespace": namespace, "fields": fields}
    (tmp_path / "Audited.v1.avsc").write_text(json.dumps(schema))
    url = registry_url(stack)
    runner = CliRunner()
    registered = runner.invoke(cli, ["schemas", "register", str(tmp_path), "--registry-url", url])
    assert registered.exit_code == 0, registered.output
    assert f"subject {namespace}.Audited, BACKWARD: v1 -> id" in registered.output
    # Edited in place: a new field without a default cannot read what v1 wrote.
    fields.append({"name": "why", "type": "string"})
    (tmp_path / "Audited.v1.avsc").write_text(json.dumps(schema))
    files_only = runner.invoke(cli, ["schemas", "check", str(tmp_path), "--files-only"])
    assert files_only.exit_code == 0, files_only.output
    checked = runner.invoke(cli, ["schemas", "check", str(tmp_path), "--registry-url", url])
    assert checked.exit_code == 1
    assert f"the registry refuses it under subject {namespace}.Audited (BACKWARD)" in (
        checked.output
    )
