"""The Confluent wire format and the registry client's contract, on an in-process fake of
the registry's HTTP API (the real one, Apicurio, is tests/e2e/test_schema_registry.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
import requests

from cdcbox.avro import Catalogue
from cdcbox.errors import ConfigError, PoisonRecord, RegistryUnavailable, SchemaError
from cdcbox.resources import resource_dir
from cdcbox.schema_registry import RegistryConfig, SchemaRegistry, at_least, frame, unframe

pytestmark = pytest.mark.unit
ORDER = {
    "order_id": "o1",
    "customer_id": "c1",
    "total_cents": 1,
    "coupon": None,
    "lines": [],
    "channel": "app",
}


class FakeRegistry(requests.Session):
    """Answers /subjects/{s}/versions and /schemas/ids/{id} as a registry does; `down`
    makes every request fail to connect. Counts the requests it was sent."""

    def __init__(self) -> None:
        super().__init__()
        self.schemas: dict[int, str] = {}
        self.requests = 0
        self.down = False

    def request(self, method: str | bytes, url: str | bytes, *args: Any, **kwargs: Any) -> Any:
        self.requests += 1
        if self.down:
            raise requests.ConnectionError("refused")
        path = str(url).split("/v7", 1)[1]
        response = requests.Response()
        response.status_code = 200
        if method == "POST" and path.endswith("/versions"):
            schema = json.loads(kwargs["data"])["schema"]
            ids = [i for i, s in self.schemas.items() if s == schema]
            schema_id = ids[0] if ids else len(self.schemas) + 1
            self.schemas[schema_id] = schema
            response._content = json.dumps({"id": schema_id}).encode()
        elif method == "POST" and path.startswith("/subjects/"):  # a lookup: never found
            response.status_code = 404
            response._content = b'{"error_code": 40403, "message": "Schema not found"}'
        elif method == "GET" and path.startswith("/schemas/ids/"):
            schema_id = int(path.rsplit("/", 1)[1])
            if schema_id not in self.schemas:
                response.status_code = 404
                response._content = b'{"error_code": 40403, "message": "Schema not found"}'
            else:
                response._content = json.dumps({"schema": self.schemas[schema_id]}).encode()
        else:
            response.status_code = 500
            response._content = b"{}"
        return response


def catalogue_on(fake: FakeRegistry) -> Catalogue:
    registry = SchemaRegistry(RegistryConfig("http://registry.test/apis/ccompat/v7"), fake)
    return Catalogue.load(resource_dir("schemas") / "avro").with_registry(registry)


def test_the_framing_is_magic_byte_zero_and_a_big_endian_id() -> None:
    assert frame(258, b"body") == b"\x00\x00\x00\x01\x02body"
    assert unframe(b"\x00\x00\x00\x01\x02body") == (258, b"body")
    with pytest.raises(PoisonRecord, match="no magic byte 0"):
        unframe(b"\xc3\x01rest")


def test_encode_registers_once_and_decode_fetches_each_id_once() -> None:
    fake = FakeRegistry()
    producer = catalogue_on(fake)
    first = producer.encode("OrderCreated", ORDER)
    second = producer.encode("OrderCreated", ORDER)
    assert first is not None and second is not None
    assert first[0][:5] == frame(1, b"")
    assert fake.requests == 1  # the id is cached after the first append
    consumer = catalogue_on(fake)
    assert consumer.decode(first[0]) == ORDER
    assert consumer.decode(second[0]) == ORDER
    assert fake.requests == 2  # one fetch of schema 1, never one per record


def test_a_registry_down_is_an_outage_and_an_unknown_id_is_poison() -> None:
    fake = FakeRegistry()
    encoded = catalogue_on(fake).encode("OrderCreated", ORDER)
    assert encoded is not None
    fake.down = True
    with pytest.raises(RegistryUnavailable, match="did not answer POST /subjects/"):
        catalogue_on(fake).encode("OrderCreated", ORDER)
    with pytest.raises(RegistryUnavailable, match="did not answer GET /schemas/ids/1"):
        catalogue_on(fake).decode(encoded[0])
    fake.down = False
    with pytest.raises(PoisonRecord, match="schema id 7 is not in the schema registry"):
        catalogue_on(fake).decode(frame(7, b""))


def test_framed_avro_without_a_registry_is_poison_naming_the_id() -> None:
    catalogue = Catalogue.load(resource_dir("schemas") / "avro")
    with pytest.raises(PoisonRecord, match="schema id 5.*no schema registry configured"):
        catalogue.decode(frame(5, b""))


def test_a_refusal_names_the_status_and_a_5xx_is_an_outage() -> None:
    fake = FakeRegistry()
    registry = SchemaRegistry(RegistryConfig("http://registry.test/apis/ccompat/v7"), fake)
    with pytest.raises(RegistryUnavailable, match="answered 500 to PUT /config/s"):
        registry.set_level("s", "BACKWARD")
    with pytest.raises(SchemaError, match="no such version of subject s and auto-register"):
        SchemaRegistry(RegistryConfig("http://r.test/v7", auto_register=False), fake).id_for(
            "s", "{}"
        )


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("registry:8081", "must start with http"),
        ("http://user:secret@registry:8081", "must not carry credentials"),
        ("user:secret@registry:8081", "must not carry credentials"),
    ],
)
def test_a_bad_registry_url_is_refused(url: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as refused:
        RegistryConfig(url)
    assert "secret" not in str(refused.value)


def test_a_subject_rule_is_at_least_as_strict_as_declared() -> None:
    assert at_least("FULL_TRANSITIVE", "BACKWARD")
    assert at_least("backward", "BACKWARD")
    assert not at_least("NONE", "BACKWARD")
    assert not at_least(None, "BACKWARD")
    assert not at_least("BACKWARD", "FULL")
