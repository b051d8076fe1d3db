"""`cdc-ctl apply` against the real Connect worker: idempotent, and refusing bad specs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml
from click.testing import CliRunner

from cdcbox.cli.main import cli
from cdcbox.connect import ConnectClient
from cdcbox.resources import resource_dir
from cdcbox.stack.endpoints import Endpoints
from tests.helpers import eventually, unique

pytestmark = pytest.mark.e2e


@pytest.fixture
def spec_file(tmp_path: Path, stack: Endpoints, connect_client: ConnectClient) -> Iterator[Any]:
    """Write variants of the shipped spec as a separate connector with its own slot and
    topics, so applying it never disturbs the connector the other tests use."""
    created: list[tuple[str, str]] = []

    def write(**overrides: Any) -> tuple[Path, str]:
        spec = yaml.safe_load((resource_dir("connectors") / "outbox-postgres.yaml").read_text())
        name = unique("test-connector")
        slot = name.replace("-", "_")
        spec["name"] = name
        spec["config"].update(
            {
                "slot.name": slot,
                "transforms.outbox.route.topic.replacement": f"{name}.${{routedByValue}}",
                "topic.prefix": name,
            }
        )
        for key, value in overrides.items():
            if value is None:
                spec["config"].pop(key, None)
            else:
                spec["config"][key] = value
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(spec))
        created.append((name, slot))
        return path, name

    yield write
    for name, slot in created:
        if connect_client.config(name) is not None:
            connect_client.delete(name)
        with psycopg.connect(stack.dsn, autocommit=True) as conn:

            def slot_released(slot: str = slot) -> bool:
                row = conn.execute(
                    "SELECT active FROM pg_replication_slots WHERE slot_name = %s", (slot,)
                ).fetchone()
                return row is None or not row[0]

            eventually(slot_released, timeout=60, what=f"slot {slot} released")
            conn.execute(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                "WHERE slot_name = %s",
                (slot,),
            )


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

    second = runner.invoke(cli, ["apply", str(path)], catch_exceptions=False)
    assert second.exit_code == 0, second.output
    assert second.output.strip() == f"{name}: unchanged (RUNNING)"
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
