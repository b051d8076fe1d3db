"""A connector stuck on one record Kafka refuses gets moving again with the record kept:
`cdc-ctl connectors quarantine` against the two failures the outbox's CHECKs now refuse
at write (rows that got in before them, or before a limit was lowered)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml
from click.testing import CliRunner
from kafka import KafkaConsumer, TopicPartition
from psycopg import sql

from cdcbox.cli.main import cli
from cdcbox.connect.client import ConnectClient
from cdcbox.limits import EventLimits
from cdcbox.migrate import migrate
from cdcbox.names import DbNames
from cdcbox.resources import resource_dir
from cdcbox.stack.endpoints import Endpoints
from tests.faults.ledger import delivered_ids
from tests.helpers import drop_slot_once_released, eventually, migrated_schema, unique

pytestmark = [pytest.mark.e2e, pytest.mark.faults, pytest.mark.timeout(300)]


def ctl(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args))


@pytest.fixture
def isolated(stack: Endpoints, tmp_path: Path) -> Iterator[tuple[DbNames, str]]:
    """An outbox, publication, slot and connector of their own, so breaking this
    connector on purpose holds up no other test."""
    schema = unique("quar")
    names = migrated_schema(
        stack.dsn, DbNames(schema=schema, publication=f"{schema}_pub"), mode="cdc", slot=schema
    )
    spec = yaml.safe_load((resource_dir("connectors") / "outbox-postgres.yaml").read_text())
    spec["name"] = schema
    spec["config"].update(
        {
            "slot.name": schema,
            "publication.name": names.publication,
            "table.include.list": names.outbox_qualified,
            "topic.prefix": schema,
            "transforms.outbox.route.topic.replacement": f"{schema}.${{routedByValue}}",
        }
    )
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec))
    applied = ctl("apply", str(path))
    assert applied.exit_code == 0, applied.output
    yield names, schema
    client = ConnectClient(stack.connect_url)
    if client.config(schema) is not None:
        client.delete(schema)
    drop_slot_once_released(stack.dsn, schema)
    with psycopg.connect(stack.dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP PUBLICATION {}").format(sql.Identifier(names.publication)))


def insert(conn: psycopg.Connection[Any], names: DbNames, aggregate: str, payload: bytes) -> str:
    """A raw outbox row (the way a row that predates the CHECKs got in)."""
    kind, _, key = aggregate.partition("|")
    event_id = str(uuid.uuid4())
    conn.execute(
        sql.SQL(
            "INSERT INTO {} (event_id, aggregate_type, aggregate_id, event_type, payload) "
            "VALUES (%s, %s, %s, 'Changed', %s)"
        ).format(names.table("outbox")),
        (event_id, kind, key, payload),
    )
    return event_id


def allow_bad_rows(conn: psycopg.Connection[Any], names: DbNames, failure: str) -> None:
    if failure == "too large":  # the outbox's limit was raised past what Kafka takes
        migrate(conn, names=names, limits=EventLimits(3_000_000))
    else:  # a table that had rows before its topic-name CHECK
        conn.execute(
            sql.SQL("ALTER TABLE {} DROP CONSTRAINT outbox_publishable").format(
                names.table("outbox")
            )
        )


def quarantined_on(bootstrap_servers: str, topic: str) -> list[Any]:
    reader = KafkaConsumer(bootstrap_servers=bootstrap_servers, group_id=None)
    partitions = [TopicPartition(topic, p) for p in reader.partitions_for_topic(topic) or ()]
    reader.assign(partitions)
    reader.seek_to_beginning()
    records = [r for batch in reader.poll(timeout_ms=5000).values() for r in batch]
    reader.close()
    return records


@pytest.mark.parametrize(
    ("failure", "bad_type", "bad_payload"),
    [("too large", "order", b"x" * 2_000_000), ("invalid topic", "bad type/x", b"{}")],
)
def test_a_stuck_connector_is_moved_past_exactly_the_record_it_failed_on(
    stack: Endpoints,
    isolated: tuple[DbNames, str],
    failure: str,
    bad_type: str,
    bad_payload: bytes,
) -> None:
    names, name = isolated
    client = ConnectClient(stack.connect_url)
    with psycopg.connect(stack.dsn, autocommit=True) as conn:
        allow_bad_rows(conn, names, failure)
        with conn.transaction():
            ok = [insert(conn, names, "order|a", b'{"n":1}')]
        with conn.transaction():  # the bad row in the middle of a transaction
            ok.append(insert(conn, names, "order|a", b'{"n":2}'))
            bad = insert(conn, names, f"{bad_type}|b", bad_payload)
            ok.append(insert(conn, names, "order|a", b'{"n":3}'))
        with conn.transaction():
            ok.append(insert(conn, names, "order|c", b'{"n":4}'))

    def task_failed() -> bool:
        status = client.status(name) or {}
        return any(t["state"] == "FAILED" for t in status.get("tasks", []))

    eventually(task_failed, timeout=90, what=f"{name}'s task FAILED on the {failure} row")

    topic = f"{name}.quarantine"
    planned = ctl("connectors", "quarantine", name, "--topic", topic, "--dry-run")
    assert planned.exit_code == 0 and f"would stop {name!r}" in planned.output, planned.output
    assert task_failed()  # the dry run stopped nothing
    result = ctl("connectors", "quarantine", name, "--topic", topic, "--yes")
    assert result.exit_code == 0, result.output
    assert f"quarantined event {bad}" in result.output

    def running() -> bool:
        status = client.status(name) or {}
        return [t["state"] for t in status.get("tasks", [])] == ["RUNNING"]

    eventually(running, timeout=90, what=f"{name} RUNNING after the quarantine")
    eventually(
        lambda: set(ok) <= set(delivered_ids(stack.bootstrap_servers, f"{name}.order")),
        timeout=90,
        what="every other event published",
    )
    with psycopg.connect(stack.dsn) as conn:
        kept = conn.execute(
            sql.SQL("SELECT event_id::text, payload, error FROM {}").format(
                names.table("quarantine")
            )
        ).fetchall()
    assert [(k[0], bytes(k[1])) for k in kept] == [(bad, bad_payload)]  # whole, nothing else
    expected = "RecordTooLarge" if failure == "too large" else "InvalidTopic"
    assert expected in kept[0][2]
    (record,) = quarantined_on(stack.bootstrap_servers, topic)
    assert dict(record.headers)["id"].decode() == bad
    assert expected in dict(record.headers)["cdcbox.quarantine.error"].decode()
