"""Rows the pipeline could not publish are refused where they are written: by the outbox
table's CHECK constraints (raw SQL too) and by `Outbox.append` before it writes."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from psycopg import sql

from cdcbox.errors import SchemaError
from cdcbox.limits import DEFAULT_MAX_PAYLOAD_BYTES, EventLimits
from cdcbox.migrate import migrate, recorded_payload_limit, render_sql
from cdcbox.names import DbNames
from cdcbox.ops.limit_checks import table_limit_check
from cdcbox.producer.outbox import NewEvent, Outbox
from tests.helpers import migrated_schema, unique

pytestmark = pytest.mark.integration

TWO_MB = b"x" * 2_000_000


@pytest.fixture
def names(database: str) -> DbNames:
    return migrated_schema(database, DbNames(schema=unique("limits")), mode="cdc")


def _raw_insert(database: str, names: DbNames, **row: Any) -> None:
    values = {
        "event_id": "0190c0de-0000-7000-8000-000000000001",
        "aggregate_type": "order",
        "aggregate_id": "o1",
        "event_type": "Created",
        "payload": b"{}",
        **row,
    }
    with psycopg.connect(database) as conn, conn.transaction():
        conn.execute(
            sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
                names.table("outbox"),
                sql.SQL(", ").join(map(sql.Identifier, values)),
                sql.SQL(", ").join(sql.Placeholder() * len(values)),
            ),
            list(values.values()),
        )


@pytest.mark.parametrize(
    ("row", "constraint"),
    [
        ({"aggregate_type": "bad type/x"}, "outbox_aggregate_type_names_a_topic"),
        ({"aggregate_type": "t" * 201}, "outbox_aggregate_type_names_a_topic"),
        ({"aggregate_type": "order.dlq"}, "outbox_aggregate_type_names_a_topic"),
        ({"aggregate_version": -5}, "outbox_aggregate_version_not_negative"),
        ({"aggregate_id": "k" * 1025}, "outbox_fields_fit_headers"),
        ({"payload": TWO_MB}, "outbox_payload_limit"),
    ],
)
def test_raw_sql_cannot_write_a_row_the_pipeline_could_not_publish(
    database: str, names: DbNames, row: dict[str, Any], constraint: str
) -> None:
    with pytest.raises(psycopg.errors.CheckViolation, match=constraint):
        _raw_insert(database, names, **row)


def test_a_row_within_every_limit_is_accepted_by_raw_sql(database: str, names: DbNames) -> None:
    _raw_insert(database, names, payload=b"x" * DEFAULT_MAX_PAYLOAD_BYTES, aggregate_version=7)


def test_append_names_the_limit_and_writes_nothing(database: str, names: DbNames) -> None:
    with psycopg.connect(database) as conn:
        refused = pytest.raises(SchemaError, match="over the outbox limit of 900000")
        with refused, conn.transaction():
            Outbox(names).append(conn, NewEvent("order", "o1", "Created", TWO_MB))
        count = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(names.table("outbox")))
        assert count.fetchone() == (0,)


def test_migrate_follows_a_changed_limit_and_doctor_sees_a_mismatch(
    database: str, names: DbNames
) -> None:
    raised = EventLimits(3_000_000)
    with psycopg.connect(database) as conn:
        assert recorded_payload_limit(conn, names) == DEFAULT_MAX_PAYLOAD_BYTES
        assert not table_limit_check(conn, names, raised).ok
        assert migrate(conn, names=names, limits=raised) == []  # no file, only the CHECK
        assert recorded_payload_limit(conn, names) == 3_000_000
        assert table_limit_check(conn, names, raised).ok
    _raw_insert(database, names, payload=TWO_MB)  # now within the limit


def test_the_sql_script_carries_the_limit_it_was_rendered_for() -> None:
    script = render_sql("cdc", DbNames(), EventLimits(123_456))
    assert "CHECK (octet_length(payload) <= 123456) NOT VALID" in script
