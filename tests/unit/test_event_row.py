"""What `Outbox.append` refuses before writing (audit 26, case 6): bytes declared JSON that
no consumer could decode, and a version the consumers' tables cannot hold."""

from __future__ import annotations

import pytest

from cdcbox.errors import SchemaError
from cdcbox.event import MAX_VERSION
from cdcbox.producer import NewEvent
from cdcbox.producer.outbox import event_row

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    "payload",
    [b"{not json", b"\xff\xfe", b"[" * 100_000 + b"]" * 100_000],
    ids=["malformed", "not-utf8", "nested-too-deep"],
)
def test_bytes_declared_json_must_be_json(payload: bytes) -> None:
    with pytest.raises(SchemaError, match="not JSON"):
        event_row(NewEvent("order", "o1", "Created", payload))


def test_bytes_that_are_json_are_kept_as_they_are() -> None:
    row = event_row(NewEvent("order", "o1", "Created", b'{"a": 1}'))
    assert row.payload == b'{"a": 1}'


def test_a_version_over_a_bigint_is_refused() -> None:
    event_row(NewEvent("order", "o1", "Created", {}, aggregate_version=MAX_VERSION))
    with pytest.raises(SchemaError, match="aggregate_version"):
        event_row(NewEvent("order", "o1", "Created", {}, aggregate_version=MAX_VERSION + 1))


@pytest.mark.parametrize("field", ["aggregate_id", "event_type", "trace_id"])
def test_a_nul_in_a_text_field_is_refused(field: str) -> None:
    values = {"aggregate_id": "o1", "event_type": "Created", "trace_id": None}
    values[field] = "a\x00b"
    with pytest.raises(SchemaError, match="NUL"):
        event_row(NewEvent("order", payload={}, **values))  # type: ignore[arg-type]
