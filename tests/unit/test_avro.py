"""The Avro catalogue: parsing, single-object round trips, validation and evolution rules."""

from __future__ import annotations

import json
import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest

from cdcbox import wire
from cdcbox.avro import MAGIC, Catalogue
from cdcbox.errors import PoisonRecord, SchemaError
from cdcbox.producer.outbox import NewEvent, event_row
from cdcbox.resources import resource_dir

SHIPPED = resource_dir("schemas") / "avro"


def sample(schema: Any) -> Any:
    """A value of every shape a schema allows, so round trips touch every field."""
    kind = (
        schema
        if isinstance(schema, str)
        else ("union" if isinstance(schema, list) else schema["type"])
    )
    if kind == "union":
        return sample(next(b for b in schema if b != "null"))
    return (
        {
            "string": "text-é",
            "bytes": b"\x00\xff",
            "int": 7,
            "long": 2**40,
            "float": 1.5,
            "double": 2.25,
            "boolean": True,
            "null": None,
        }.get(kind)
        if isinstance(kind, str) and kind not in ("record", "array", "map", "enum")
        else {
            "record": lambda: {f["name"]: sample(f["type"]) for f in schema["fields"]},
            "array": lambda: [sample(schema["items"]), sample(schema["items"])],
            "map": lambda: {"k": sample(schema["values"])},
            "enum": lambda: schema["symbols"][0],
        }[kind]()
    )


def test_every_shipped_schema_round_trips() -> None:
    catalogue = Catalogue.load(SHIPPED)
    assert set(catalogue.events) == {"OrderCreated", "PaymentSucceeded", "OrderCancelled"}
    for schemas in catalogue.events.values():
        for version in schemas.versions:
            datum = sample(json.loads(version.path.read_text()))
            if schemas.encoding == "avro" and version is schemas.latest:
                encoded = catalogue.encode(schemas.event_type, datum)
                assert encoded is not None
                value, content_type = encoded
                assert content_type == wire.CONTENT_TYPE_AVRO
                assert value[:2] == MAGIC and value[2:10] == version.fingerprint
                assert catalogue.decode(value) == datum
    assert catalogue.check() == []


def test_a_newer_reader_fills_the_new_field_with_its_default(tmp_path: Path) -> None:
    old = tmp_path / "old"
    old.mkdir()
    shutil.copy(SHIPPED / "events.yaml", old)
    for name in ("OrderCreated.v1.avsc", "PaymentSucceeded.v1.avsc", "OrderCancelled.v1.avsc"):
        shutil.copy(SHIPPED / name, old)
    order = {
        "order_id": "o1",
        "customer_id": "c1",
        "total_cents": 100,
        "coupon": None,
        "lines": [{"sku": "s", "quantity": 1, "price_cents": 100}],
    }
    encoded = Catalogue.load(old).encode("OrderCreated", order)
    assert encoded is not None
    assert Catalogue.load(SHIPPED).decode(encoded[0]) == {**order, "channel": "web"}


def test_producer_refuses_a_payload_that_breaks_the_schema_and_names_the_field() -> None:
    catalogue = Catalogue.load(SHIPPED)
    with pytest.raises(SchemaError, match="total_cents"):
        event_row(
            NewEvent(
                "order",
                "o1",
                "OrderCreated",
                {"order_id": "o1", "customer_id": "c", "total_cents": "lots", "lines": []},
            ),
            catalogue,
        )
    with pytest.raises(SchemaError, match="amount_cents"):
        event_row(
            NewEvent("order", "o1", "PaymentSucceeded", {"order_id": "o1", "payment_id": "p"}),
            catalogue,
        )
    # A JSON-encoded event type is validated, then written as JSON.
    row = event_row(
        NewEvent(
            "order",
            "o1",
            "PaymentSucceeded",
            {"order_id": "o1", "payment_id": "p", "amount_cents": 5},
        ),
        catalogue,
    )
    assert row.content_type == wire.CONTENT_TYPE_JSON
    assert json.loads(row.payload) == {"order_id": "o1", "payment_id": "p", "amount_cents": 5}


def test_unknown_fingerprint_and_garbage_are_poison() -> None:
    catalogue = Catalogue.load(SHIPPED)
    with pytest.raises(PoisonRecord, match="unknown Avro schema fingerprint"):
        catalogue.decode(MAGIC + uuid.uuid4().bytes[:8] + b"\x00")
    with pytest.raises(PoisonRecord, match="not Avro single-object"):
        catalogue.decode(b'{"json": true}')


def write_catalogue(tmp_path: Path, mode: str, v1: dict[str, Any], v2: dict[str, Any]) -> Path:
    (tmp_path / "events.yaml").write_text(f"Thing:\n  encoding: avro\n  compatibility: {mode}\n")
    (tmp_path / "Thing.v1.avsc").write_text(json.dumps(v1))
    (tmp_path / "Thing.v2.avsc").write_text(json.dumps(v2))
    return tmp_path


def record(*fields: dict[str, Any]) -> dict[str, Any]:
    return {"type": "record", "name": "Thing", "fields": list(fields)}


@pytest.mark.parametrize(
    ("mode", "v1", "v2", "reason"),
    [
        (
            "backward",
            record({"name": "a", "type": "string"}),
            record({"name": "a", "type": "string"}, {"name": "b", "type": "int"}),
            "Thing.b: the reader needs this field",
        ),
        (
            "backward",
            record({"name": "a", "type": "long"}),
            record({"name": "a", "type": "int"}),
            "Thing.a: type changed from long to int",
        ),
        (
            "forward",
            record({"name": "a", "type": "string"}, {"name": "b", "type": "int"}),
            record({"name": "a", "type": "string"}),
            "Thing.b: the reader needs this field",
        ),
        (
            "full",
            record({"name": "a", "type": "string"}),
            record({"name": "a", "type": "string"}, {"name": "b", "type": "int"}),
            "v1 -> v2 (full)",
        ),
    ],
)
def test_incompatible_changes_are_explained(
    tmp_path: Path, mode: str, v1: dict[str, Any], v2: dict[str, Any], reason: str
) -> None:
    problems = Catalogue.load(write_catalogue(tmp_path, mode, v1, v2)).check()
    assert any(reason in p for p in problems), problems


def test_compatible_changes_pass(tmp_path: Path) -> None:
    v1 = record({"name": "a", "type": "int"})
    v2 = record({"name": "a", "type": "long"}, {"name": "b", "type": "string", "default": ""})
    assert Catalogue.load(write_catalogue(tmp_path, "backward", v1, v2)).check() == []


def test_invalid_schema_names_the_file(tmp_path: Path) -> None:
    bad = record({"name": "a", "type": "no-such-type"})
    with pytest.raises(SchemaError, match="Thing.v1.avsc"):
        Catalogue.load(write_catalogue(tmp_path, "backward", bad, bad))
