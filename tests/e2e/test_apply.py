"""`cdc-ctl apply` against the real Connect worker: idempotent, and refusing bad specs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cdcbox.cli.main import cli
from cdcbox.connect import ConnectClient
from cdcbox.stack.endpoints import Endpoints

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
