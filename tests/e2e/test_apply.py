"""`cdc-ctl apply` against the real Connect worker: idempotent, and refusing bad specs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner

from cdcbox.cli.main import cli
from cdcbox.connect.client import ConnectClient
from cdcbox.producer.outbox import NewEvent, Outbox
from cdcbox.stack.endpoints import Endpoints
from tests.e2e.topics import read_topic
from tests.helpers import eventually, unique

pytestmark = pytest.mark.e2e


def test_apply_twice_changes_nothing_the_second_time(
    spec_file: Any, connect_client: ConnectClient
) -> None:
    path, name = spec_file()
    runner = CliRunner()
    first = runner.invoke(cli, ["apply", str(path)], catch_exceptions=False)
    assert first.exit_code == 0, first.output
    assert f"{name}: applied (RUNNING)" in first.output
    assert "(new connector)" in first.output
    live = connect_client.config(name)
    assert live is not None and live["slot.name"] == name.replace("-", "_")

    # stderr says what apply is doing, with the states it waited through, after the
    # warning that the slot does not exist yet (nothing written before its start is kept).
    warning, *progress = first.stderr.splitlines()
    assert warning.startswith(f"{name}: warning: {name.replace('-', '_')} does not exist")
    assert progress[0].startswith(f"{name}: validating with the worker's ")
    assert any(line.startswith(f"{name}: writing its config (") for line in progress)
    assert "waiting for RUNNING: connector RUNNING, tasks 0:RUNNING (" in progress[-1]

    second = runner.invoke(cli, ["apply", str(path)], catch_exceptions=False)
    assert second.exit_code == 0, second.output
    assert second.stdout.strip() == f"{name}: unchanged (RUNNING)"
    assert "warning" not in second.stderr  # the connector made its slot
    assert connect_client.config(name) == live


def test_unknown_option_is_refused_before_connect_sees_it(
    spec_file: Any, connect_client: ConnectClient
) -> None:
    path, name = spec_file(**{"snapshot.moed": "no_data"})
    result = CliRunner().invoke(cli, ["apply", str(path)])
    assert result.exit_code == 2  # a refused spec is bad input
    assert "snapshot.moed: unknown option" in result.output
    assert connect_client.config(name) is None


def test_invalid_value_is_refused_with_connects_reason(
    spec_file: Any, connect_client: ConnectClient
) -> None:
    path, name = spec_file(**{"snapshot.mode": "never-ever"})
    result = CliRunner().invoke(cli, ["apply", str(path)])
    assert result.exit_code == 2
    assert "snapshot.mode" in result.output
    assert connect_client.config(name) is None


def test_inline_password_is_refused_and_never_printed(
    spec_file: Any, connect_client: ConnectClient
) -> None:
    path, name = spec_file(**{"database.password": "hunter2-inline"})
    result = CliRunner().invoke(cli, ["apply", str(path)])
    assert result.exit_code == 2
    assert "database.password holds a literal secret" in result.output
    assert "hunter2-inline" not in result.output
    assert connect_client.config(name) is None


def test_live_config_holds_the_placeholder_not_the_password(
    stack: Endpoints, connect_client: ConnectClient
) -> None:
    live = connect_client.config("cdcbox-outbox")
    assert live is not None
    password = Path(stack.debezium_password_file).read_text().split("=", 1)[1].strip()
    assert live["database.password"].startswith("${file:")
    assert password not in str(live)


def test_events_written_between_migrate_and_the_first_apply_are_published(
    spec_file: Any, stack: Endpoints
) -> None:
    path, name = spec_file()
    slot, aggregate_type = name.replace("-", "_"), unique("early")
    runner = CliRunner()
    migrated = runner.invoke(cli, ["db", "migrate", "--slot", slot], catch_exceptions=False)
    assert migrated.exit_code == 0, migrated.output
    with psycopg.connect(stack.dsn) as conn, conn.transaction():
        early = Outbox().append_many(
            conn, [NewEvent(aggregate_type, f"a{i}", "Created", {"i": i}) for i in range(3)]
        )
    applied = runner.invoke(cli, ["apply", str(path)], catch_exceptions=False)
    assert applied.exit_code == 0, applied.output
    records = read_topic(stack, f"{name}.{aggregate_type}", expect=3, settle_ms=1000)
    assert sorted(dict(r.headers)["id"].decode() for r in records) == sorted(map(str, early))


def test_slot_drop_refuses_the_slot_of_a_stopped_connector_with_unpublished_events(
    spec_file: Any, stack: Endpoints, connect_client: ConnectClient
) -> None:
    path, name = spec_file()
    slot, aggregate_type = name.replace("-", "_"), unique("held")
    runner = CliRunner()
    assert runner.invoke(cli, ["apply", str(path)], catch_exceptions=False).exit_code == 0
    connect_client.stop(name)
    connect_client.wait_until(name, "STOPPED", timeout_s=60)
    with psycopg.connect(stack.dsn) as conn, conn.transaction():
        Outbox().append_many(conn, [NewEvent(aggregate_type, "a", "Created", {}) for _ in range(4)])

    def slot_inactive() -> bool:
        with psycopg.connect(stack.dsn) as conn:
            row = conn.execute(
                "SELECT active FROM pg_replication_slots WHERE slot_name = %s", (slot,)
            ).fetchone()
        return row == (False,)

    eventually(slot_inactive, timeout=60, what=f"slot {slot} released by the stopped task")
    refused = runner.invoke(cli, ["slot", "drop", slot, "--yes"])
    assert refused.exit_code == 2, refused.output
    assert f"connector {name} streams from it" in refused.output
    assert "holds 4 unpublished outbox events" in refused.output
    connect_client.resume(name)
    records = read_topic(stack, f"{name}.{aggregate_type}", expect=4, timeout=60)
    assert len(records) == 4
